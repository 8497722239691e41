// Package docker is the launcher's backend for Docker and Podman (through Podman's
// Docker-compatible API): one throwaway sibling container per sandbox.
//
// It owns the container's hardening, decided in one pure function, ContainerSpec: no
// network, a read-only root, every capability dropped, no-new-privileges, the seccomp
// profile (SeccompProfile: moby's default minus io_uring, ptrace, process_vm_readv,
// process_vm_writev and pidfd_getfd), the user and limits of the backend.Spec, a private
// noexec tmpfs, read-only tmpfs over Podman's writable /run and /var/tmp, ReadonlyPaths
// over /proc and the cgroup mounts, no log driver. The benchmark's `docker run`
// baseline takes its flags from the same function.
//
// It also owns the Engine API calls and their quirks: attach before start (output
// before an attach is lost), always demultiplexing the attach stream, creates that are
// not cancelled half-way (a container created after its client gave up would leak),
// removals retried while the engine is busy or away, Podman's seccomp option as a file
// path and its 500 "no such container" (IsGone), and classifying unreachable engines as
// backend.ErrEngineUnavailable. Dialing the engine is launcher/engine's business.
package docker
