package mcpserver

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// EgressProfile describes one operator-named egress profile to the model:
// the name it may pass as "egress" and what the profile opens. The runner enforces it.
type EgressProfile struct {
	Name  string
	Hosts []string // exact names and "*.suffix"
	Ports []int
	// Inject are the hosts whose requests the server's proxy sets credentials on (the
	// profile's inject rules): the program sends none of its own there.
	Inject []string
}

// egressSchema sets the "egress" property of exec's input schema: the enum of the
// configured profiles' names, or no property at all when none is configured (the
// schema forbids unknown properties, so a call that names one is then refused).
func egressSchema(s *jsonschema.Schema, o Options) {
	egressProperty(s, o, "Optional. The name of an egress profile the operator configured; the program may then reach the hosts it names, and only those, over HTTP(S) through the proxy that HTTP_PROXY and HTTPS_PROXY point at (no DNS, no UDP, no other host or port). Absent: no network at all. Not with session_id: a session's profile is chosen at session_create. ")
}

// sessionEgressSchema is egressSchema for session_create's input.
func sessionEgressSchema(s *jsonschema.Schema, o Options) {
	if o.Sessions.shared() {
		// Shared sessions (Kubernetes) take no profile: launcher.ErrSharedEgress.
		o.Egress = nil
	}
	egressProperty(s, o, "Optional. The name of an egress profile the operator configured, for every exec call in this session: each may reach the hosts it names, and only those, over HTTP(S) through the proxy that HTTP_PROXY and HTTPS_PROXY point at (no DNS, no UDP, no other host or port), within its caps per call. Fixed for the session's life: exec calls with this session_id cannot name another. Absent: the session has no network at all. ")
}

// egressProperty sets s's "egress" to the enum of the profiles' names with desc and
// the list, or removes it when none is configured.
func egressProperty(s *jsonschema.Schema, o Options, desc string) {
	if len(o.Egress) == 0 {
		delete(s.Properties, "egress")
		return
	}
	p := s.Properties["egress"]
	p.Enum = nil
	for _, e := range o.Egress {
		p.Enum = append(p.Enum, e.Name)
	}
	p.Description = desc + egressList(o.Egress)
}

// egressList is the profiles as one line each, for the model.
func egressList(ps []EgressProfile) string {
	var b strings.Builder
	b.WriteString("Profiles:")
	for _, e := range ps {
		ports := make([]string, len(e.Ports))
		for i, p := range e.Ports {
			ports[i] = strconv.Itoa(p)
		}
		inject := ""
		if len(e.Inject) > 0 {
			inject = "; credentials set by the server for " + strings.Join(e.Inject, ", ")
		}
		fmt.Fprintf(&b, " %s (%s; ports %s%s);", e.Name, strings.Join(e.Hosts, ", "), strings.Join(ports, ", "), inject)
	}
	return strings.TrimSuffix(b.String(), ";") + "."
}

// egressDescription is what exec's description adds when profiles are configured.
func egressDescription(o Options) string {
	if len(o.Egress) == 0 {
		return ""
	}
	return "\n\nEgress: with \"egress\" set to a profile's name, the program may reach that profile's hosts over HTTP and HTTPS through a proxy (HTTP_PROXY and HTTPS_PROXY are set, so urllib, requests and pip use it; TLS is end to end, except to a host where the server sets credentials: there the request arrives with them, so send none of your own). A refused host, port or address is answered 403 with the reason. There is still no DNS, no UDP and no other way out. Each call with a profile starts a new sandbox (not a warm one). In a session, the profile is the one session_create was given (its calls leave \"egress\" out). " + egressList(o.Egress)
}

// checkEgress refuses a profile name that is not configured (the schema's enum
// already does; this keeps newJob safe for any caller).
func checkEgress(name string, o Options) error {
	if name == "" || slices.ContainsFunc(o.Egress, func(e EgressProfile) bool { return e.Name == name }) {
		return nil
	}
	if len(o.Egress) == 0 {
		return &invalidInput{"egress", "egress: this server has no egress profiles (" + o.Vars.Var(SettingEgressProfiles) + "): leave it out"}
	}
	names := make([]string, len(o.Egress))
	for i, e := range o.Egress {
		names[i] = e.Name
	}
	return &invalidInput{"egress", fmt.Sprintf("egress is %q; it must be one of %s", name, strings.Join(names, ", "))}
}
