// Package kube is the Kubernetes backend: one hardened Pod per sandbox, created through the
// API server and attached over the API (client-go's remotecommand, SPDY), never through
// kubectl. It satisfies launcher.Backend; the launcher owns everything else (bootstrap,
// frames, pool, timeouts, limits check, reaping). Its SessionStore keeps the sessions
// that every replica serves in their pods' annotations (shared.go). It depends on
// launcher/backend only, never on the launcher.
//
// # Invariants
//
//   - Every pod is configured by PodSpec alone (non-root 65532, read-only root, no
//     capabilities, no privilege escalation, a seccomp profile, no ServiceAccount token, no
//     service links, no host namespaces or paths, DNS that resolves nothing, memory-backed
//     /tmp and /dev/shm with a size, limits equal to requests, an ephemeral-storage limit,
//     activeDeadlineSeconds, grace period 0), and carries the ownership labels and the
//     deployer's fixed labels only: no caller data in any field, annotation or event.
//   - Code, stdin and files travel only over the attach stream's stdin. The container's
//     first program is a fixed start gate that waits for the backend's line (the pod's seal
//     key), so the bootstrap writes nothing before an attach carries its output.
//   - Nothing of the caller's reaches the node's disk: the CRI runtime copies every byte a
//     container writes to stdout or stderr into the node's container log, attached or not,
//     so the bootstrap seals its stdout (frames, output, files) with a keystream from 32
//     random bytes of this pod alone, which only stdin carried (seal.go); its stderr holds
//     its own diagnostics only. The key reaches the bootstrap through a pipe read after the
//     fork, so the program never holds it.
//   - The backend's requests are exactly those docs/deploy/kubernetes' Role allows (pods create,
//     get, list, watch, delete; pods/attach create), in the sandbox namespace, which is never
//     the server pod's own (CheckNamespace: that one holds its token Secret); its tests run as
//     that ServiceAccount. Every pod PodSpec makes passes docs/deploy/kubernetes' admission policy,
//     which admits nothing else there.
//   - A create is never cancelled mid-request, so every pod made has a known name and is
//     deleted; deletes use grace period 0.
package kube
