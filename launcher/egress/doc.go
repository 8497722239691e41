// Package egress holds the decision logic of egress profiles: which hosts and
// ports a sandbox with a given profile may reach, which resolved addresses it may never
// reach whatever its profile says, and how much it may use per call. It is pure Go with
// no listener and no I/O of its own beyond the Resolver it is handed.
//
// The proxy that uses it is launcher/egress/proxy; the server loads the profiles with
// --egress-profiles, and the launcher gives a job with a profile a cold sandbox holding
// a channel of its own (launcher/egress.go). A sandbox without a profile has no network
// at all. The Docker/Podman and Kubernetes backends carry a channel; the process backend
// (standalone mode) refuses profiles.
//
// # Threat model
//
// The code in the sandbox is hostile and chooses the host name, the port and, through
// any DNS it controls, the answers a name resolves to. A profile is written by the
// operator and trusted, but may be too broad by mistake. The proxy that uses this
// package sits in the server, so anything the server can reach (loopback, the host's
// private networks, the cloud's metadata service, the server's own listeners) is what
// the sandbox must not reach through it. The known ways allowlists fail are: names
// matched after resolution, DNS rebinding between a check and a second lookup, IP
// literals and their integer spellings, private addresses hidden in IPv6 forms that
// embed an IPv4 address, and DNS offered to the sandbox (a covert channel). This
// package answers the first four; the fifth is answered by never giving the sandbox a
// resolver at all.
//
// # Invariants
//
//   - Names are checked before any DNS lookup: Resolve calls the Resolver only for a
//     name and port its profile allows, so a refused name causes no query (and so no
//     DNS exfiltration through the proxy).
//   - A profile never names an address: IP literals in every spelling (v4, v6,
//     bracketed, zoned, and the integer forms inet_aton accepts such as 2130706433 or
//     0x7f.1) are refused in profiles and in requests alike.
//   - Names are compared in one canonical form: ASCII (IDNA A-labels, via the lookup
//     profile of golang.org/x/net/idna), lower case, no trailing dot. The canonical
//     name is the one matched and the one resolved.
//   - Resolution is done by the proxy (Resolve), and every address of the answer is
//     vetted (Vet). One refused address refuses the whole answer, so a rebinding
//     server cannot mix a public address with a private one and count on the
//     dialer's order.
//   - The name is looked up rooted (with a trailing dot), so the resolver never
//     appends a search domain and an internal name cannot answer for a public one.
//   - The dialer connects to an address Resolve returned, and never looks the name up
//     again: a second lookup is where DNS rebinding wins.
//   - Vet refuses every address that is not plainly a public unicast destination:
//     loopback, private, link-local, CGNAT, multicast, broadcast, unspecified,
//     documentation, benchmarking and reserved ranges, the metadata addresses, IPv6
//     outside 2000::/3, deprecated or tunnelling forms, the embedded IPv4 address of
//     IPv4-mapped, NAT64 and 6to4 addresses, and the server's own addresses.
//   - Denials are typed (*Denial) and their text holds a reason, the host and the
//     port, never a request path, a body or a resolver's raw message, so a proxy may
//     print it in a 403 body. The host is quoted, so it cannot break a header.
//   - Counter enforces the per-call caps with compare-and-swap: concurrent
//     connections of one sandbox never get past a cap together.
//
// # Profiles file
//
// ParseProfiles reads:
//
//	{"profiles": {
//	  "pypi": {
//	    "hosts": ["pypi.org", "*.pythonhosted.org"],
//	    "ports": [443],
//	    "max_connections": 32,
//	    "max_bytes": 268435456
//	  }
//	}}
//
// A profile's name is 1 to 32 characters of [a-z0-9_-] starting with a letter (the
// names become a JSON-schema enum). hosts is required and not empty: exact names, or
// "*.suffix" where the wildcard is one whole leftmost label. "*.x.org" matches any name
// with one or more labels before x.org (a.x.org, a.b.x.org) and never x.org itself:
// list x.org too to allow it. A wildcard's suffix must be below a public suffix
// (golang.org/x/net/publicsuffix): *.pythonhosted.org is allowed, *.com, *.co.uk and
// *.github.io are refused. Names under a TLD that is not in the public suffix list
// (localhost, local, internal, lan, ...) and the special-use names of RFC 6761 and
// after (arpa, test, invalid, example, onion, alt) are refused. ports defaults to [443]
// when absent; an empty list is an error. max_connections (connections per call, each
// counted once its name and port pass the profile, before its lookup, so that the cap
// bounds the lookups too) and max_bytes (bytes both ways per call) are optional;
// absent or 0 means the profile sets no cap. Unknown fields, duplicate profile names and trailing data are
// errors, and every error names the profile and the field.
package egress
