// Package engine reaches a Docker or Podman engine: it finds the engine's address
// (an explicit one, DOCKER_HOST, Docker's socket, then Podman's rootless and rootful
// sockets), dials it over unix://, tcp:// (with the Docker CLI's TLS variables; a
// remote engine without verified TLS is refused unless explicitly allowed) or ssh://
// (one `ssh ... docker system dial-stdio` process per connection), and identifies
// the product behind it (Docker or Podman, and their versions).
//
// It knows nothing of sandboxes: launcher/docker runs them through the client made
// here, and cmd/mcp-exec wires the two together.
package engine
