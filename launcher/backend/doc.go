// Package backend defines what a sandbox backend is given and gives back: the
// backend-neutral Spec of one sandbox, the Conn to its attached standard streams, its
// Exit as the backend recorded it, the labels that mark a sandbox's owner, the errors
// every backend classifies its failures into, what a session store keeps of a session
// (SessionRecord, with Due, the one rule that ends a session, and SessionClaim), and the
// Setting by which every library names an operator's setting (never by its environment
// variable).
//
// It holds no state and imports nothing but the standard library, so that a backend
// (launcher/docker for Docker and Podman, launcher/kube for Kubernetes pods,
// launcher/process for child processes) depends on it, never on the launcher or on
// another backend, and the launcher's own tests can wire a real backend in. The
// interface a backend implements, launcher.Backend, is defined by its consumer.
//
// A backend must apply every field of Spec (a limit it cannot apply is an error, or is
// caught by launcher.VerifyLimits), must never put caller data anywhere (caller data
// only ever travels over Conn), and must report a sandbox that no longer exists as
// ErrNotFound, however its engine phrases that.
package backend
