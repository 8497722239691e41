package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"
)

// TestDiscoverHost: with no host configured, Docker's socket wins, then Podman's
// rootless socket, then its rootful one; an explicit host or DOCKER_HOST always wins.
func TestDiscoverHost(t *testing.T) {
	type layout struct {
		docker, rootless, rootful bool // which sockets exist
	}
	tests := []struct {
		name       string
		explicit   string
		dockerHost string
		xdgUnset   bool
		files      layout
		want       string // "" leaves it to the client's defaults; "ROOTLESS"/"ROOTFUL" name the temp paths
	}{
		{name: "nothing exists", want: ""},
		{name: "docker socket", files: layout{docker: true, rootless: true, rootful: true}, want: ""},
		{name: "rootless podman", files: layout{rootless: true, rootful: true}, want: "ROOTLESS"},
		{name: "rootful podman", files: layout{rootful: true}, want: "ROOTFUL"},
		{name: "no XDG_RUNTIME_DIR", xdgUnset: true, files: layout{rootless: true, rootful: true}, want: "ROOTFUL"},
		{name: "no XDG_RUNTIME_DIR, rootless only", xdgUnset: true, files: layout{rootless: true}, want: ""},
		{name: "DOCKER_HOST wins", dockerHost: "tcp://engine:2376", files: layout{rootful: true}, want: ""},
		{name: "explicit host wins", explicit: "ssh://me@engine", dockerHost: "tcp://x:1", files: layout{rootful: true}, want: "ssh://me@engine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			xdg := filepath.Join(dir, "run-user")
			dockerSock := filepath.Join(dir, "var-run", "docker.sock")
			rootfulSock := filepath.Join(dir, "run", "podman", "podman.sock")
			rootlessSock := filepath.Join(xdg, "podman", "podman.sock")
			touch := func(path string, yes bool) {
				if !yes {
					return
				}
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			touch(dockerSock, tt.files.docker)
			touch(rootlessSock, tt.files.rootless)
			touch(rootfulSock, tt.files.rootful)
			env := map[string]string{"DOCKER_HOST": tt.dockerHost}
			if !tt.xdgUnset {
				env["XDG_RUNTIME_DIR"] = xdg
			}
			d := defaultDiscovery()
			d.getenv = func(k string) string { return env[k] }
			d.dockerSocket = dockerSock
			d.podmanSocket = rootfulSock

			want := tt.want
			switch want {
			case "ROOTLESS":
				want = "unix://" + rootlessSock
			case "ROOTFUL":
				want = "unix://" + rootfulSock
			}
			if got := d.host(tt.explicit); got != want {
				t.Errorf("host(%q): got %q, want %q", tt.explicit, got, want)
			}
		})
	}
}

// TestNewClientHonoursHost: the address NewClient settles on is the client's.
func TestNewClientHonoursHost(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///from/env.sock")
	cli, err := NewClient("")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if got := cli.DaemonHost(); got != "unix:///from/env.sock" {
		t.Errorf("DaemonHost with DOCKER_HOST: got %q", got)
	}
	cli2, err := NewClient("unix:///explicit.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer cli2.Close()
	if got := cli2.DaemonHost(); got != "unix:///explicit.sock" {
		t.Errorf("DaemonHost with an explicit host: got %q", got)
	}
}

// TestNewClientSSH: an ssh:// host, explicit or from DOCKER_HOST, gets the ssh
// transport (remote_test.go runs it), not a TCP dial to "user@host".
func TestNewClientSSH(t *testing.T) {
	for _, env := range []bool{false, true} {
		host := "ssh://me@engine.example:22"
		if env {
			t.Setenv("DOCKER_HOST", host)
			host = ""
		}
		cli, err := NewClient(host)
		if err != nil {
			t.Fatalf("NewClient(ssh, from env %v): %v", env, err)
		}
		if got := cli.DaemonHost(); got != "ssh://engine.example:22" {
			t.Errorf("NewClient(ssh, from env %v): DaemonHost %q", env, got)
		}
		cli.Close()
	}
}

type fakeVersioner struct {
	v   client.ServerVersionResult
	err error
}

func (f fakeVersioner) ServerVersion(context.Context, client.ServerVersionOptions) (client.ServerVersionResult, error) {
	return f.v, f.err
}

func TestIdentifyEngine(t *testing.T) {
	tests := []struct {
		name        string
		v           client.ServerVersionResult
		wantProduct string
		wantString  string
	}{
		{
			// Measured: Debian's docker.io 20.10 gives no platform name.
			name: "docker 20.10 (Debian)",
			v: client.ServerVersionResult{Version: "20.10.24+dfsg1", APIVersion: "1.41", Components: []system.ComponentVersion{
				{Name: "Engine", Version: "20.10.24+dfsg1"}, {Name: "containerd", Version: "1.6.20~ds1"}, {Name: "runc", Version: "1.1.5+ds1"},
			}},
			wantProduct: ProductDocker, wantString: "Docker Engine 20.10.24+dfsg1 (API 1.41)",
		},
		{
			name: "docker CE",
			v: client.ServerVersionResult{Platform: client.PlatformInfo{Name: "Docker Engine - Community"}, Version: "28.2.2", APIVersion: "1.50",
				Components: []system.ComponentVersion{{Name: "Engine", Version: "28.2.2"}}},
			wantProduct: ProductDocker, wantString: "Docker Engine 28.2.2 (API 1.50)",
		},
		{
			// Measured: Podman 4.3.1's compat API; its platform name is the OS.
			name: "podman 4.3",
			v: client.ServerVersionResult{Platform: client.PlatformInfo{Name: "linux/amd64/debian-12"}, Version: "4.3.1", APIVersion: "1.41",
				Components: []system.ComponentVersion{
					{Name: "Podman Engine", Version: "4.3.1"}, {Name: "Conmon", Version: "conmon version 2.1.6"}, {Name: "OCI Runtime (runc)", Version: "runc version 1.1.5"},
				}},
			wantProduct: ProductPodman, wantString: "Podman Engine 4.3.1 (API 1.41)",
		},
		{
			name:        "no components, named platform",
			v:           client.ServerVersionResult{Platform: client.PlatformInfo{Name: "Docker Desktop 4.49.0 (208003)"}, Version: "28.5.1", APIVersion: "1.51"},
			wantProduct: ProductDocker, wantString: "Docker Engine 28.5.1 (API 1.51)",
		},
		{
			name:        "unknown",
			v:           client.ServerVersionResult{Version: "1.0", APIVersion: "1.40"},
			wantProduct: "unknown engine", wantString: "unknown engine 1.0 (API 1.40)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := Identify(t.Context(), fakeVersioner{v: tt.v})
			if err != nil {
				t.Fatal(err)
			}
			if info.Product != tt.wantProduct {
				t.Errorf("product: got %q, want %q", info.Product, tt.wantProduct)
			}
			if info.IsPodman() != (tt.wantProduct == ProductPodman) {
				t.Errorf("IsPodman: got %v", info.IsPodman())
			}
			name, err := Name(t.Context(), fakeVersioner{v: tt.v})
			if err != nil || name != tt.wantString {
				t.Errorf("Name: got %q, %v; want %q", name, err, tt.wantString)
			}
		})
	}
	boom := errors.New("boom")
	if _, err := Name(t.Context(), fakeVersioner{err: boom}); !errors.Is(err, boom) {
		t.Errorf("Name on error: got %v, want it to wrap %v", err, boom)
	}
}

// TestEngineNameLive names the engine the integration tests run against (skipped
// without one, outside CI).
func TestEngineNameLive(t *testing.T) {
	cli, err := NewClient("")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	name, err := Name(t.Context(), cli)
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no engine: %v", err)
		}
		t.Fatal(err)
	}
	t.Logf("engine at %s: %s", cli.DaemonHost(), name)
}
