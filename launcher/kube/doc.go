// Package kube is the Kubernetes backend: one hardened Pod per sandbox, created through the
// API server and attached over the API (client-go's remotecommand, SPDY), never through
// kubectl. It satisfies launcher.Backend; the launcher owns everything else (bootstrap,
// frames, pool, timeouts, limits check, reaping).
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
//     first program is a fixed start gate that waits for the backend's newline, so the
//     bootstrap writes nothing before an attach carries its output.
//   - The backend's requests are exactly those deploy/kubernetes' Role allows (pods create,
//     get, list, watch, delete; pods/attach create); its tests run as that ServiceAccount.
//   - A create is never cancelled mid-request, so every pod made has a known name and is
//     deleted; deletes use grace period 0.
//
// Known gap: the CRI runtime writes every container's stdout and stderr to the node's
// container log, attached or not, so the program's (framed) output reaches the node's disk
// (docs/kubernetes.md, "Threat model").
package kube
