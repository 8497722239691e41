package upstream

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// httpClient is the client of an HTTP upstream: its configured headers go only to
// the configured URL's origin, and a redirect to another origin is refused.
func httpClient(s Server, base http.RoundTripper) *http.Client {
	u, _ := url.Parse(s.URL) // checked by Parse
	home := origin(u)
	return &http.Client{
		Transport: &wire{home: home, headers: s.Headers, base: base},
		// Refused, not followed without the headers: a 307 or 308 would send the call
		// (the program's arguments) to a server the operator did not name.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if to := origin(req.URL); to != home {
				return fmt.Errorf("upstream %q redirected to another origin, %s; refused (set its \"url\" to where the server is)", s.Name, to)
			}
			if len(via) >= 10 {
				return fmt.Errorf("upstream %q: stopped after 10 redirects", s.Name)
			}
			return nil
		},
	}
}

// origin is u's scheme, host and port, the port made explicit.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// wire adds the configured headers to requests to home only, whatever redirect or
// endpoint the SDK follows: Go's client drops Authorization on a redirect to another
// host, but a RoundTripper that adds it on every hop would undo that.
type wire struct {
	home    string
	headers map[string]string
	base    http.RoundTripper
}

func (w *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(w.headers) > 0 && origin(r.URL) == w.home {
		r = r.Clone(r.Context())
		for k, v := range w.headers {
			r.Header.Set(k, v)
		}
	}
	return w.base.RoundTrip(r)
}
