package launcher

import (
	"testing"

	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
)

// testClient returns a client of the engine the tests run against (DOCKER_HOST, else
// the discovered socket), closed at the test's end.
func testClient(t testing.TB) *client.Client {
	t.Helper()
	return testClientAt(t, "")
}

func testClientAt(t testing.TB, host string) *client.Client {
	t.Helper()
	cli, err := engine.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// testBackend is the Docker/Podman backend on cli.
func testBackend(t testing.TB, cli docker.Client, log zerolog.Logger) Backend {
	t.Helper()
	be, err := docker.New(cli, log)
	if err != nil {
		t.Fatal(err)
	}
	return be
}
