package egress

import (
	"net/netip"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// maxInput bounds the work done on a host name before anything else: a DNS name is at
// most 253 characters, and a longer Unicode spelling is refused rather than mapped.
const maxInput = 1024

// specialTLDs are the last labels of special-use names (RFC 6761, 6762, 7686, 8375,
// 9476, and the names private networks use by habit) that a profile and a request may
// never name, even when a resolver would answer for them.
var specialTLDs = map[string]bool{
	"localhost": true, "local": true, "internal": true, "arpa": true, "test": true,
	"invalid": true, "example": true, "onion": true, "alt": true, "lan": true,
	"home": true, "corp": true, "localdomain": true, "intranet": true, "private": true,
}

// canonicalName returns host in the one form this package matches and resolves: IDNA
// A-labels (the lookup profile of golang.org/x/net/idna), lower case, no trailing dot. It refuses IP literals in every spelling,
// names that are not valid DNS names, single-label names and special-use names.
func canonicalName(host string) (string, *Denial) {
	if host == "" {
		return "", deny(ReasonInvalidName, "", 0, "empty host name")
	}
	if len(host) > maxInput {
		return "", deny(ReasonInvalidName, host, 0, "host name longer than %d bytes", maxInput)
	}
	if isIPLiteral(host) {
		return "", deny(ReasonIPLiteral, host, 0, "an IP address, not a name")
	}
	name := strings.TrimSuffix(host, ".")
	if isASCII(name) {
		// Say what is wrong in plain terms before IDNA's own checks of xn-- labels.
		name = strings.ToLower(name)
		if why := ldhProblem(name); why != "" {
			return "", deny(ReasonInvalidName, host, 0, "%s", why)
		}
	}
	ascii, err := idna.Lookup.ToASCII(name)
	if err != nil {
		return "", deny(ReasonInvalidName, host, 0, "not a valid internationalized name")
	}
	// The mapping can turn a Unicode spelling into an address (fullwidth digits).
	if isIPLiteral(ascii) {
		return "", deny(ReasonIPLiteral, host, 0, "an IP address, not a name")
	}
	if why := ldhProblem(ascii); why != "" {
		return "", deny(ReasonInvalidName, host, 0, "%s", why)
	}
	labels := strings.Split(ascii, ".")
	last := labels[len(labels)-1]
	if isNumericLabel(last) {
		return "", deny(ReasonIPLiteral, host, 0, "a numeric form of an IP address, not a name")
	}
	if len(labels) < 2 {
		return "", deny(ReasonSpecialName, host, 0, "a single-label name (resolved through search domains)")
	}
	if specialTLDs[last] {
		return "", deny(ReasonSpecialName, host, 0, "a special-use name (.%s)", last)
	}
	// Under a TLD the public suffix list does not know, PublicSuffix falls back to the
	// last label with icann false; private-section suffixes (github.io) have a dot.
	if ps, icann := publicsuffix.PublicSuffix(ascii); !icann && !strings.Contains(ps, ".") {
		return "", deny(ReasonSpecialName, host, 0, "not under a public top-level domain")
	}
	return ascii, nil
}

// isIPLiteral reports whether s is an IP address in the forms netip parses, bracketed
// or not, with or without a zone.
func isIPLiteral(s string) bool {
	if strings.HasPrefix(s, "[") {
		return true // never a name; "[::1]" and its broken spellings alike
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}

// isNumericLabel reports whether a label is a number in one of the bases inet_aton
// accepts (decimal, octal with a leading 0, hex with 0x). A name whose last label is
// numeric is read as an address by inet_aton and by some resolvers (2130706433,
// 0x7f.1, 0177.0.0.1), and no public TLD is numeric.
func isNumericLabel(l string) bool {
	if h, ok := strings.CutPrefix(l, "0x"); ok {
		return strings.Trim(h, "0123456789abcdef") == ""
	}
	return strings.Trim(l, "0123456789") == ""
}

// ldhProblem checks a lower-case ASCII name against the letters-digits-hyphen rule
// and DNS lengths, and says what is wrong, or returns "".
func ldhProblem(name string) string {
	if len(name) > 253 {
		return "name longer than 253 characters"
	}
	for _, label := range strings.Split(name, ".") {
		switch {
		case label == "":
			return "empty label"
		case len(label) > 63:
			return "label longer than 63 characters"
		case label[0] == '-' || label[len(label)-1] == '-':
			return "label starts or ends with a hyphen"
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return "character not allowed in a host name"
			}
		}
	}
	return ""
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
