package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine they started is still running
// at the end. The exceptions are client-go's, for the life of the process: it keeps one
// transport per TLS configuration, and for a client certificate read from a file, a
// goroutine (with its work queue and poller) that watches the file for rotation
// (client-go/transport/cert_rotation.go); nothing can stop them. The Kubernetes tests
// close the idle connections of that transport themselves.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("k8s.io/client-go/transport.(*dynamicClientCert).run"),
		goleak.IgnoreAnyFunction("k8s.io/client-go/transport.(*dynamicClientCert).processNextWorkItem"),
		goleak.IgnoreTopFunction("k8s.io/client-go/util/workqueue.(*delayingType[...]).waitingLoop"),
		// The rotation's poller (wait.PollImmediateUntil, started by dynamicClientCert.run):
		// nothing else in this package polls with apimachinery's wait.
		goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.PollImmediateUntil"),
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/util/wait.PollImmediateUntilWithContext.poller.func1.1"),
	)
}
