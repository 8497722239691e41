package engine

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/go-connections/tlsconfig"
	"github.com/moby/moby/client"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Environment variables the engine connection reads, as the Docker CLI does.
const (
	envHost       = client.EnvOverrideHost     // DOCKER_HOST
	envTLSVerify  = client.EnvTLSVerify        // DOCKER_TLS_VERIFY: any non-empty value turns TLS and verification on
	envTLS        = "DOCKER_TLS"               // any non-empty value turns TLS on, without verification
	envCertPath   = client.EnvOverrideCertPath // DOCKER_CERT_PATH: ca.pem, cert.pem, key.pem
	envConfigDir  = "DOCKER_CONFIG"            // the CLI's configuration directory, the default cert path
	defaultTCP    = "2375"                     // the CLI's default port without TLS
	defaultTLSTCP = "2376"                     // and with TLS
)

// ConnOptions are the connection policies NewClientWith applies on top of what the
// Docker CLI does.
type ConnOptions struct {
	// AllowInsecure permits a tcp:// engine that is not on a loopback address without
	// verified TLS (plain TCP, or DOCKER_TLS without DOCKER_TLS_VERIFY). Without it
	// such an address is refused: the Engine API is root on the engine's host, and the
	// connection carries the callers' code, input and output.
	AllowInsecure bool
	// Warn, when set, receives a warning about a connection allowed only because of
	// AllowInsecure.
	Warn func(msg string)
}

// connPlan is how to reach the engine: the address for the client, and the HTTP
// client that carries its transport (TLS, or a dialer through ssh), if not the default.
type connPlan struct {
	host string
	http *http.Client
	ssh  bool // http dials through ssh
	// insecure says why the connection is not authenticated, for a remote tcp:// engine
	// without verified TLS; empty otherwise.
	insecure string
}

// planConn resolves the engine's address (explicit, else DOCKER_HOST, else
// discovery) and how to connect to it, reading the environment through getenv.
func planConn(explicit string, getenv func(string) string, d discovery) (connPlan, error) {
	host := d.host(explicit)
	if host == "" {
		host = getenv(envHost)
	}
	if host == "" {
		return connPlan{}, nil // the client's default socket
	}
	scheme, _, ok := strings.Cut(host, "://")
	if !ok {
		return connPlan{}, fmt.Errorf("engine host %q: want unix://PATH, tcp://HOST[:PORT] or ssh://[USER@]HOST[:PORT]", host)
	}
	switch scheme {
	case "unix":
		return connPlan{host: host}, nil
	case "tcp":
		return planTCP(host, getenv)
	case "ssh":
		spec, err := parseSSH(host)
		if err != nil {
			return connPlan{}, err
		}
		return connPlan{host: spec.clientHost(), http: sshHTTPClient(sshDialer{spec: spec, command: "ssh"}), ssh: true}, nil
	default:
		return connPlan{}, fmt.Errorf("engine host %q: scheme %q is not supported (unix://, tcp:// or ssh://)", host, scheme)
	}
}

// planTCP: tcp://[HOST][:PORT][/PATH], with the CLI's defaults (localhost; port 2376
// with TLS, 2375 without) and its TLS variables: DOCKER_TLS_VERIFY (non-empty: TLS,
// verifying the engine's certificate against ca.pem only), DOCKER_TLS (non-empty: TLS
// without verification), DOCKER_CERT_PATH (default $DOCKER_CONFIG, else ~/.docker).
func planTCP(host string, getenv func(string) string) (connPlan, error) {
	u, err := url.Parse(host)
	if err != nil {
		return connPlan{}, fmt.Errorf("engine host %q: %w", host, err)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return connPlan{}, fmt.Errorf("engine host %q: a tcp:// address takes no user, query or fragment", host)
	}
	verify := getenv(envTLSVerify) != ""
	useTLS := verify || getenv(envTLS) != ""

	name, port := u.Hostname(), u.Port()
	if name == "" {
		name = "localhost"
	}
	if port == "" {
		port = defaultTCP
		if useTLS {
			port = defaultTLSTCP
		}
	}
	p := connPlan{host: "tcp://" + net.JoinHostPort(name, port) + strings.TrimSuffix(u.Path, "/")}

	if useTLS {
		cfg, err := tlsFromEnv(getenv, verify)
		if err != nil {
			return connPlan{}, fmt.Errorf("engine host %s: %w", p.host, err)
		}
		p.http = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, CheckRedirect: client.CheckRedirect}
	}
	if !loopback(name) {
		switch {
		case !useTLS && getenv(envCertPath) != "":
			p.insecure = "plain TCP (DOCKER_CERT_PATH is set, but like the Docker CLI TLS stays off without DOCKER_TLS_VERIFY=1)"
		case !useTLS:
			p.insecure = "plain TCP (no TLS)"
		case !verify:
			p.insecure = "TLS without verifying the engine's certificate (DOCKER_TLS without DOCKER_TLS_VERIFY)"
		}
	}
	return p, nil
}

// tlsFromEnv builds the client's TLS configuration from DOCKER_CERT_PATH as the CLI
// does: ca.pem must exist when verifying and is then the only trusted root; cert.pem
// and key.pem are the client's certificate, left out when neither file exists.
func tlsFromEnv(getenv func(string) string, verify bool) (*tls.Config, error) {
	dir := getenv(envCertPath)
	if dir == "" {
		dir = getenv(envConfigDir)
	}
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("finding the TLS certificates: set %s: %w", envCertPath, err)
		}
		dir = filepath.Join(home, ".docker")
	}
	opts := tlsconfig.Options{
		CAFile:             filepath.Join(dir, "ca.pem"),
		CertFile:           filepath.Join(dir, "cert.pem"),
		KeyFile:            filepath.Join(dir, "key.pem"),
		InsecureSkipVerify: !verify,
		ExclusiveRootPools: true,
		MinVersion:         tls.VersionTLS12,
	}
	if !exists(opts.CertFile) && !exists(opts.KeyFile) {
		opts.CertFile, opts.KeyFile = "", ""
	}
	cfg, err := tlsconfig.Client(opts)
	if err != nil {
		return nil, fmt.Errorf("TLS from %s: %w", dir, err)
	}
	return cfg, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

// loopback reports a host name that is a loopback address by itself, without DNS:
// "localhost" or a loopback IP.
func loopback(name string) bool {
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// NewClientWith is NewClient with connection policies.
func NewClientWith(host string, o ConnOptions) (*client.Client, error) {
	return newClient(host, o, os.Getenv, defaultDiscovery())
}

// SettingAllowInsecure (ConnOptions.AllowInsecure) accepts a remote engine without
// verified TLS.
const SettingAllowInsecure backend.Setting = "allow-insecure-engine"

func newClient(host string, o ConnOptions, getenv func(string) string, d discovery) (*client.Client, error) {
	p, err := planConn(host, getenv, d)
	if err != nil {
		return nil, err
	}
	if p.insecure != "" {
		if !o.AllowInsecure {
			return nil, &backend.SettingError{Setting: SettingAllowInsecure, Text: func(v backend.Vars) string {
				return fmt.Sprintf("engine host %s: refusing %s to an engine that is not on this machine: "+
					"the Engine API is root on that host and the connection carries the callers' code and output; "+
					"use TLS (DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH with ca.pem, cert.pem, key.pem) or ssh://, "+
					"or accept the risk by setting %s to true", p.host, p.insecure, v.Name(SettingAllowInsecure))
			}}
		}
		if o.Warn != nil {
			o.Warn(fmt.Sprintf("UNSAFE: engine connection to %s is %s (allowed by %s)", p.host, p.insecure, SettingAllowInsecure))
		}
	}
	opts := []client.Opt{client.WithAPIVersionFromEnv()}
	switch {
	case p.host == "":
	case p.http == nil:
		opts = append(opts, client.WithHost(p.host))
	case p.ssh:
		// WithHost names the engine (DaemonHost) and would configure a TCP dialer;
		// the HTTP client after it replaces that transport with the ssh one.
		opts = append(opts, client.WithHost(p.host), client.WithHTTPClient(p.http))
	default:
		// TLS: WithHost configures the dialer and proxy of the TLS transport.
		opts = append(opts, client.WithHTTPClient(p.http), client.WithHost(p.host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating engine client: %w", err)
	}
	return cli, nil
}

// sshHTTPClient is an HTTP client whose every connection is a new `ssh ... docker
// system dial-stdio` process. It has no proxy: the connection is the ssh process.
func sshHTTPClient(d sshDialer) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext: d.DialContext,
			// Each new connection is an ssh handshake (about 0.8 s measured on
			// loopback): keep more of them for reuse than the default of 2.
			MaxIdleConns:        8,
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		CheckRedirect: client.CheckRedirect,
	}
}
