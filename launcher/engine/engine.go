package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/moby/client"
)

// NewClient connects to the engine at host, or where DOCKER_HOST points when host is
// empty, negotiating the API version down to what the engine speaks. Addresses and
// the TLS variables (DOCKER_TLS_VERIFY, DOCKER_TLS, DOCKER_CERT_PATH) mean what they
// mean to the Docker CLI: unix://PATH; tcp://[HOST][:PORT] (localhost, port 2376 with
// TLS, 2375 without; with DOCKER_TLS_VERIFY only ca.pem is trusted); and
// ssh://[USER@]HOST[:PORT][/SOCKET], each connection a `ssh ... docker system
// dial-stdio` process. A tcp:// engine off this machine without verified TLS is
// refused (see NewClientWith). When neither names an engine and Docker's default
// socket (/var/run/docker.sock) does not exist, it uses Podman's socket:
// $XDG_RUNTIME_DIR/podman/podman.sock (rootless), then /run/podman/podman.sock
// (rootful), the first that exists. Name says which engine answered.
func NewClient(host string) (*client.Client, error) {
	return NewClientWith(host, ConnOptions{})
}

// Where engines listen by default on Linux.
const (
	dockerSocket       = "/var/run/docker.sock"    // client.DefaultDockerHost
	podmanRootfulSock  = "/run/podman/podman.sock" // podman system service, as root
	podmanRootlessSock = "podman/podman.sock"      // under $XDG_RUNTIME_DIR
)

// discovery finds the engine's address when none is configured. Its environment and
// file system are parameters so that tests can point it at temporary directories.
type discovery struct {
	getenv       func(string) string
	exists       func(path string) bool
	dockerSocket string
	podmanSocket string // the rootful one; the rootless one is under XDG_RUNTIME_DIR
}

func defaultDiscovery() discovery {
	return discovery{
		getenv: os.Getenv,
		exists: func(path string) bool {
			_, err := os.Stat(path)
			return err == nil
		},
		dockerSocket: dockerSocket,
		podmanSocket: podmanRootfulSock,
	}
}

// host returns the address to connect to, or "" to leave it to the client's own
// defaults (DOCKER_HOST, else Docker's socket).
func (d discovery) host(explicit string) string {
	switch {
	case explicit != "":
		return explicit
	case d.getenv(client.EnvOverrideHost) != "":
		return "" // client.FromEnv applies it
	case d.exists(d.dockerSocket):
		return "" // client.DefaultDockerHost
	}
	var candidates []string
	if xdg := d.getenv("XDG_RUNTIME_DIR"); xdg != "" {
		candidates = append(candidates, filepath.Join(xdg, podmanRootlessSock))
	}
	candidates = append(candidates, d.podmanSocket)
	for _, c := range candidates {
		if d.exists(c) {
			return "unix://" + c
		}
	}
	return "" // nothing found: errors will name Docker's default socket
}

// Engine products, as Info.Product names them.
const (
	ProductDocker = "Docker Engine"
	ProductPodman = "Podman Engine"
)

// Info identifies the engine behind a client.
type Info struct {
	Product    string // ProductDocker, ProductPodman, or the name the engine gives itself
	Version    string // the product's version (for Podman, Podman's, not the API's)
	APIVersion string // the Docker API version the engine speaks
	Platform   string // the engine's platform name, when it gives one
}

func (e Info) String() string {
	s := e.Product
	if e.Version != "" {
		s += " " + e.Version
	}
	if e.APIVersion != "" {
		s += " (API " + e.APIVersion + ")"
	}
	return s
}

// IsPodman reports whether the engine is Podman's Docker-compatible service.
func (e Info) IsPodman() bool { return e.Product == ProductPodman }

// Versioner is the part of the client Identify needs.
type Versioner interface {
	ServerVersion(ctx context.Context, options client.ServerVersionOptions) (client.ServerVersionResult, error)
}

// Identify asks the engine which product and version it is, from its version
// report: Podman lists a "Podman Engine" component, Docker an "Engine" component (and
// a platform name such as "Docker Engine - Community" in official builds).
func Identify(ctx context.Context, eng Versioner) (Info, error) {
	v, err := eng.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return Info{}, fmt.Errorf("asking the engine for its version: %w", err)
	}
	return identify(v), nil
}

func identify(v client.ServerVersionResult) Info {
	info := Info{Version: v.Version, APIVersion: v.APIVersion, Platform: v.Platform.Name}
	for _, c := range v.Components {
		switch {
		case strings.EqualFold(c.Name, ProductPodman) || strings.HasPrefix(strings.ToLower(c.Name), "podman"):
			info.Product = ProductPodman
		case c.Name == "Engine":
			info.Product = ProductDocker
		default:
			continue
		}
		if c.Version != "" {
			info.Version = c.Version
		}
		return info
	}
	switch p := v.Platform.Name; {
	case strings.Contains(strings.ToLower(p), "podman"):
		info.Product = ProductPodman
	case strings.Contains(strings.ToLower(p), "docker"):
		info.Product = ProductDocker
	case p != "":
		info.Product = p
	default:
		info.Product = "unknown engine"
	}
	return info
}

// Name is Identify as one line, e.g. "Podman Engine 4.3.1 (API 1.41)" or
// "Docker Engine 20.10.24+dfsg1 (API 1.41)", for the server's start-up log.
func Name(ctx context.Context, eng Versioner) (string, error) {
	info, err := Identify(ctx, eng)
	if err != nil {
		return "", err
	}
	return info.String(), nil
}
