// Package egress holds the decision logic of egress profiles: which hosts and ports a
// sandbox with a given profile may reach (Profile.AllowName), which resolved addresses
// it may never reach whatever its profile says (Vet), and how much it may use per call
// (Counter), and which headers the proxy sets on requests to a host (Profile.Inject,
// values resolved at parse time and never printed). It has no listener and no network I/O of its own beyond the Resolver it
// is handed. ParseProfiles states the rules of the operator's profiles file.
//
// The code in the sandbox is hostile and chooses the name, the port and, through any
// DNS it controls, the answers; a profile is trusted but may be too broad. The
// invariants:
//   - A name is checked, in one canonical form, before any lookup, so a refused name
//     causes no query; IP literals in every spelling are refused (canonicalName).
//   - Resolve looks the name up rooted, vets every address of the answer (one refused
//     address refuses it whole) and returns addresses the dialer must use without a
//     second lookup, where DNS rebinding would win.
//   - Every refusal is a *Denial whose text is safe to print in a 403.
//
// The proxy that uses it is launcher/egress/proxy; which backends carry a channel, and
// the threat model, are in docs/egress.md.
package egress
