// Package kube is the Kubernetes backend: one hardened Pod per sandbox, created through
// the API server and attached over the API (client-go's remotecommand, SPDY), never
// through kubectl. It satisfies launcher.Backend and imports launcher/backend and
// launcher/wire only; the launcher owns everything else (bootstrap, frames, pool,
// timeouts, limits check, reaping). Its SessionStore keeps only the state of the
// sessions every replica serves, in their pods' annotations (shared.go).
//
// # Invariants
//
//   - Every pod is PodSpec alone, carrying the ownership labels, the deployer's fixed
//     labels and a session's state only: no caller data in any field, annotation or event.
//   - Code, stdin and files travel only over the attach stream's stdin, behind a start
//     gate (startGate); nothing of the caller's reaches the node's disk, since the
//     bootstrap seals its stdout with a key of this pod alone (seal.go).
//   - The backend's requests are exactly those docs/deploy/kubernetes' Role allows, in a
//     sandbox namespace that is never the server pod's own (CheckNamespace).
//   - A create is never cancelled mid-request, so every pod made is known and deleted.
//
// docs/kubernetes.md describes the pod, the seal, RBAC and admission in full.
package kube
