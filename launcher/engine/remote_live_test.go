//go:build remoteengine

// Remote engines for real: a second dockerd on 127.0.0.1 with mutual TLS
// (scripts/tls-engine.sh) and an sshd on 127.0.0.1 in front of the main engine
// (scripts/ssh-engine.sh). scripts/remote-test.sh starts both, runs these tests and
// stops them; built only with -tags remoteengine, and then nothing is optional: a
// missing variable fails the test.

package engine_test

import (
	"crypto/x509"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

func requireEnv(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run these tests through scripts/remote-test.sh", name)
	}
	return v
}

// engineEnv points engine.NewClient("") at host with exactly the given TLS variables.
func engineEnv(t *testing.T, host string, tlsEnv map[string]string) {
	t.Helper()
	t.Setenv("DOCKER_HOST", host)
	for _, k := range []string{"DOCKER_TLS_VERIFY", "DOCKER_TLS", "DOCKER_CERT_PATH", "DOCKER_CONTEXT", "DOCKER_API_VERSION"} {
		t.Setenv(k, tlsEnv[k])
	}
}

func TestTLSEngineLive(t *testing.T) {
	host := requireEnv(t, "MCP_EXEC_TEST_TLS_HOST")
	certs := requireEnv(t, "MCP_EXEC_TEST_TLS_CERTS")
	verified := map[string]string{"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": certs}

	// The main engine, to prove the TLS one is another.
	local, err := client.New(client.WithHost("unix://" + engine.DockerSocket))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	localInfo, err := local.Info(t.Context(), client.InfoOptions{})
	if err != nil {
		t.Fatalf("main engine: %v", err)
	}

	t.Run("jobs over verified TLS", func(t *testing.T) {
		engineEnv(t, host, verified)
		cli, err := engine.NewClient("")
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		if cli.DaemonHost() != host {
			t.Errorf("DaemonHost = %q, want %q", cli.DaemonHost(), host)
		}
		name, err := engine.Name(t.Context(), cli)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("engine at %s: %s", cli.DaemonHost(), name)
		if !strings.HasPrefix(name, engine.ProductDocker) {
			t.Errorf("engine name %q, want %s", name, engine.ProductDocker)
		}
		info, err := cli.Info(t.Context(), client.InfoOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if info.Info.DockerRootDir == localInfo.Info.DockerRootDir {
			t.Fatalf("the TLS engine is the main engine (data root %s)", info.Info.DockerRootDir)
		}

		l := launchertest.New(t, launcher.Options{Instance: "test-remote-tls"})
		runRemoteJobs(t, l)

		// Errors name the engine they are about.
		l2 := launchertest.Unchecked(t, cli, launcher.Options{Image: "mcp-exec/not-there:v0", Instance: "test-remote-tls-missing"})
		if err := l2.Check(t.Context()); !errors.Is(err, launcher.ErrImageMissing) || !strings.Contains(err.Error(), host) {
			t.Errorf("Check = %v, want launcher.ErrImageMissing naming %s", err, host)
		}
	})

	// ping connects with the TLS variables given and returns the engine's answer.
	ping := func(t *testing.T, env map[string]string) error {
		t.Helper()
		engineEnv(t, host, env)
		cli, err := engine.NewClient("")
		if err != nil {
			return err
		}
		defer cli.Close()
		_, err = cli.Ping(t.Context(), client.PingOptions{})
		return err
	}

	rogue := engine.NewTestCA(t)
	t.Run("client without a certificate is refused", func(t *testing.T) {
		dir := t.TempDir()
		engine.CopyFile(t, filepath.Join(certs, "ca.pem"), filepath.Join(dir, "ca.pem"))
		err := ping(t, map[string]string{"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": dir})
		if err == nil || !strings.Contains(err.Error(), "tls: ") {
			t.Fatalf("ping = %v, want a TLS refusal", err)
		}
		t.Logf("refused: %v", err)
	})
	t.Run("client certificate from another CA is refused", func(t *testing.T) {
		dir := t.TempDir()
		engine.CopyFile(t, filepath.Join(certs, "ca.pem"), filepath.Join(dir, "ca.pem"))
		cert, key := rogue.Issue(t, true)
		os.WriteFile(filepath.Join(dir, "cert.pem"), cert, 0o600)
		os.WriteFile(filepath.Join(dir, "key.pem"), key, 0o600)
		err := ping(t, map[string]string{"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": dir})
		if err == nil || !strings.Contains(err.Error(), "tls: ") {
			t.Fatalf("ping = %v, want a TLS refusal", err)
		}
		t.Logf("refused: %v", err)
	})
	t.Run("engine certificate not from ca.pem is refused", func(t *testing.T) {
		// The right client certificate, but a ca.pem that did not sign the engine's.
		dir := t.TempDir()
		engine.CopyFile(t, filepath.Join(certs, "cert.pem"), filepath.Join(dir, "cert.pem"))
		engine.CopyFile(t, filepath.Join(certs, "key.pem"), filepath.Join(dir, "key.pem"))
		os.WriteFile(filepath.Join(dir, "ca.pem"), rogue.PEM(), 0o600)
		err := ping(t, map[string]string{"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": dir})
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Fatalf("ping = %v, want x509.UnknownAuthorityError", err)
		}
	})
	t.Run("plain HTTP to the TLS port fails", func(t *testing.T) {
		if err := ping(t, nil); err == nil {
			t.Fatal("a plain-HTTP ping of the TLS engine succeeded")
		}
	})
	t.Run("DOCKER_TLS without verification works on loopback, like the CLI", func(t *testing.T) {
		dir := t.TempDir()
		engine.CopyFile(t, filepath.Join(certs, "cert.pem"), filepath.Join(dir, "cert.pem"))
		engine.CopyFile(t, filepath.Join(certs, "key.pem"), filepath.Join(dir, "key.pem"))
		os.WriteFile(filepath.Join(dir, "ca.pem"), rogue.PEM(), 0o600) // not checked
		if err := ping(t, map[string]string{"DOCKER_TLS": "1", "DOCKER_CERT_PATH": dir}); err != nil {
			t.Fatal(err)
		}
	})
}

// sshVia puts an `ssh` first in PATH that runs the real one with the test's client
// configuration (ssh reads ~/.ssh/config from the password database's home, so HOME
// cannot point it elsewhere).
func sshVia(t *testing.T, config string) {
	t.Helper()
	real, err := exec.LookPath("ssh")
	if err != nil {
		t.Fatalf("no ssh client: %v", err)
	}
	dir := t.TempDir()
	script := "#!/bin/sh\nexec " + strconv.Quote(real) + " -F " + strconv.Quote(config) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
}

func TestSSHEngineLive(t *testing.T) {
	host := requireEnv(t, "MCP_EXEC_TEST_SSH_HOST")
	config := requireEnv(t, "MCP_EXEC_TEST_SSH_CONFIG")
	unknown := requireEnv(t, "MCP_EXEC_TEST_SSH_CONFIG_UNKNOWN")

	t.Run("jobs over ssh", func(t *testing.T) {
		sshVia(t, config)
		engineEnv(t, host, nil)
		cli, err := engine.NewClient("")
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		name, err := engine.Name(t.Context(), cli)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("engine at %s: %s", cli.DaemonHost(), name)
		if !strings.HasPrefix(name, engine.ProductDocker) || !strings.HasPrefix(cli.DaemonHost(), "ssh://127.0.0.1:") {
			t.Errorf("engine %q at %q, want %s at ssh://127.0.0.1:PORT", name, cli.DaemonHost(), engine.ProductDocker)
		}
		l := launchertest.New(t, launcher.Options{Instance: "test-remote-ssh"})
		runRemoteJobs(t, l)
		if len(engine.SSHChildren()) == 0 {
			t.Error("no ssh process seen while the client is open: the leftover check would prove nothing")
		}
	})
	engine.AssertNoSSHChildren(t)

	t.Run("unknown host key is refused", func(t *testing.T) {
		sshVia(t, unknown)
		engineEnv(t, host, nil)
		l := testLauncherNoCheck(t)
		err := l.Check(t.Context())
		if err == nil || !strings.Contains(err.Error(), "Host key verification failed") || !errors.Is(err, launcher.ErrEngineUnavailable) {
			t.Fatalf("Check = %v, want launcher.ErrEngineUnavailable with ssh's host key refusal", err)
		}
		t.Logf("refused: %v", err)
	})
	engine.AssertNoSSHChildren(t)
}

// testLauncherNoCheck is a launcher on engine.NewClient("") that has not talked to the engine.
func testLauncherNoCheck(t *testing.T) *launcher.Launcher {
	t.Helper()
	cli, err := engine.NewClient("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return launchertest.Unchecked(t, cli, launcher.Options{Image: "mcp-exec/python-sandbox:v1", Instance: "test-remote-unchecked"})
}
