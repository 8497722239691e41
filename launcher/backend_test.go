package launcher

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/docker"
)

// testBackend is the Docker/Podman backend on cli.
func testBackend(t testing.TB, cli docker.Client, log zerolog.Logger) Backend {
	t.Helper()
	be, err := docker.New(cli, log)
	if err != nil {
		t.Fatal(err)
	}
	return be
}
