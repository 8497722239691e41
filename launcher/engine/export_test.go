package engine

import (
	"testing"

	"github.com/moby/moby/client"
)

// For the tests in package engine_test, which run jobs through a launcher (an
// internal test cannot: launcher/docker imports this package).
var (
	FakeSSH             = fakeSSH
	SSHChildren         = sshChildren
	AssertNoSSHChildren = assertNoSSHChildren
	NewTestCA           = newTestCA
	CopyFile            = copyFile
)

const DockerSocket = dockerSocket

type TestCA = testCA

func (ca testCA) Issue(t testing.TB, client bool) (certPEM, keyPEM []byte) {
	return ca.issue(t, client)
}
func (ca testCA) PEM() []byte { return ca.pem }

// NewClientNoEnv is NewClient(host) with no environment and no discovery.
func NewClientNoEnv(host string) (*client.Client, error) {
	return newClient(host, ConnOptions{}, envMap(nil), noDiscovery)
}
