package backend

import (
	"errors"
	"io"
	"net"
	"strings"
	"time"
)

// Labels on every sandbox. They carry ownership metadata only, never caller data, so
// that a restarted server can find and remove what it left behind.
const (
	LabelRole     = "dev.mcp-exec.role"     // always RoleSandbox
	LabelInstance = "dev.mcp-exec.instance" // the launcher's Options.Instance
	RoleSandbox   = "sandbox"
	// LabelSessionKey marks a session sandbox that every replica of the server may
	// serve (launcher/kube's SessionStore): its value is a truncated hash of the
	// session's handle, never the handle. Such a sandbox is not its instance's alone:
	// List leaves it out, so no replica's reaper, orphan sweep or shutdown removes it;
	// the session's own expiry does (every replica's sweeper).
	LabelSessionKey = "dev.mcp-exec.session-key"
	// LabelOwner names the server process that made the sandbox (launcher/owner's
	// ID), so that another server on the same engine can tell whether it is gone:
	// servers that share an instance name (two stdio servers on one workstation both
	// take the host's name) must not remove each other's sandboxes.
	LabelOwner = "dev.mcp-exec.owner"
	// LabelOwnerContainer is the engine's id of the container the owner runs in, if
	// any: a peer in another PID namespace cannot see the owner's process, but can ask
	// the engine whether that container stopped or restarted since the sandbox was made.
	LabelOwnerContainer = "dev.mcp-exec.owner-container"
)

// Listed is one sandbox as a backend lists it with its owner (launcher.OwnerLister).
type Listed struct {
	ID             string
	Owner          string    // its LabelOwner; "" for none
	OwnerContainer string    // its LabelOwnerContainer; "" for none
	Created        time.Time // when it was created (to the second at least)
	Running        bool      // created and not yet ended, or the backend cannot tell
	Ended          time.Time // when it stopped (or was created, if never started); zero if unknown
}

// Spec is one sandbox, as every backend must make it. It is pure data, the same for
// every sandbox of a launcher, and holds nothing of any job: code, stdin and files
// arrive later over Conn.
type Spec struct {
	Image    string
	Command  []string // argv of PID 1 (the bootstrap); the image's entrypoint is not used
	Env      []string // the whole environment: nothing of the server's is inherited
	UID, GID int      // the unprivileged user every process runs as
	WorkDir  string   // working directory: a private, noexec tmpfs of TmpfsSize bytes
	Hostname string
	Labels   map[string]string // LabelRole and LabelInstance at least
	// Annotations, where the backend has them (Kubernetes): a shared session's state
	// (hashes, deadlines, its call count), never caller data.
	Annotations map[string]string

	Memory    int64   // bytes; also the memory+swap limit (no swap)
	Pids      int64   // processes and threads
	CPUs      float64 // CPU quota, in CPUs
	TmpfsSize int64   // bytes of WorkDir (and of the private /dev/shm)
	Runtime   string  // OCI runtime name, for backends that have one; "" is the default

	// EgressDir, when set, is a host directory holding the Unix socket of this
	// sandbox's egress channel (launcher/egress/proxy), to be bind-mounted read-only at
	// EgressMount in this sandbox alone. Only the Docker/Podman backend applies it;
	// the others refuse a Spec that sets it. Metadata only: a random path.
	EgressDir string
	// EgressConns, when set, serves this sandbox's egress channel on a backend that
	// carries the sandbox's connections itself instead of mounting a socket (Kubernetes:
	// over port-forward streams to the pod's bootstrap, which only that pod can answer;
	// launcher/kube). The sandbox's environment then holds EgressTunnelEnv. Only the
	// Kubernetes backend applies it; the others refuse a Spec that sets it.
	EgressConns EgressServer
	// EgressCABundle, with EgressConns, is the CA bundle (PEM certificates, public: the
	// server's system roots and its egress proxy's CA, never a key) of a channel whose
	// profile has inject rules: the backend writes it at EgressMount/EgressBundle in
	// this sandbox alone, where the environment's SSL_CERT_FILE points. nil: none.
	EgressCABundle []byte
}

// EgressServer serves the connections of one sandbox's egress channel that its backend
// carries (Spec.EgressConns).
type EgressServer interface {
	// ServeEgress serves one connection the sandbox's program opened to its relay,
	// until it ends, and closes it.
	ServeEgress(conn net.Conn)
}

// EgressChannel is one sandbox's open egress channel (launcher/egress/proxy.Channel),
// as the launcher holds it.
type EgressChannel interface {
	// Dir is the host directory holding the channel's socket, for Spec.EgressDir; ""
	// for a channel without a socket, whose connections the backend carries
	// (Spec.EgressConns).
	Dir() string
	EgressServer
	// ResetCaps starts a new call's caps (a session's channel serves many calls).
	ResetCaps()
	// Close ends the channel and its connections; it may be called more than once.
	Close() error
}

// AuditLabel names, in the egress audit log, what a sandbox's channel serves, with the
// keys and values of the server's own log lines, so that an operator can join the two:
// a one-shot call's exec_id (with its run's hash when it runs in the background), or a
// session's hash. It is the server's metadata: a random id or a handle's hash, never a
// handle and never caller data. The zero value names nothing.
type AuditLabel struct {
	ExecID  string // the exec_id of the call's log line
	Session string // the "session" of the session's log lines: its handle's hash
	Run     string // the "run" of the background run's log lines: its handle's hash
}

// EgressTunnelEnv, in a sandbox's environment, tells its bootstrap that its egress
// relay takes its upstream connections from the backend (Spec.EgressConns) on the
// loopback port EgressTunnelPort instead of dialling the mounted socket. It is the
// wire between the server and the bootstrap, not configuration: no operator sets it,
// which is why a library may spell it.
const EgressTunnelEnv = "MCP_EXEC_EGRESS=tunnel"

// EgressTunnelPort is the loopback port where the bootstrap of a sandbox whose channel
// is served by its backend accepts the backend's streams: each waits there until the
// program opens a connection to the relay, which then writes one byte, "O", on it and
// relays the connection over it.
const EgressTunnelPort = 3129

// EgressMount is where a sandbox with an egress profile finds its channel's directory.
const EgressMount = "/egress"

// EgressBundle is the name, in EgressMount, of the CA bundle a sandbox whose profile
// has inject rules trusts.
const EgressBundle = "ca-bundle.pem"

// Conn is a started sandbox's attached standard streams. Writes go to the sandbox's
// stdin; its stdout and stderr are copied, demultiplexed, into the writers given to
// Start until they end.
type Conn interface {
	io.Writer
	// CloseWrite half-closes stdin: the program reads end of file.
	CloseWrite() error
	// Close drops the streams. It does not stop the sandbox (Kill and Remove do).
	Close() error
	// Done is closed once stdout and stderr have ended: the sandbox exited or the
	// streams were closed, and every byte has been written to the writers.
	Done() <-chan struct{}
}

// Exit is what the backend recorded about a sandbox whose streams ended.
type Exit struct {
	Running   bool // still running (or the backend cannot tell): the streams were lost
	Code      int  // exit status of PID 1; 128+N when killed by signal N
	OOMKilled bool // the backend saw a kill for memory (not every backend can)
}

// Errors backends wrap their failures in, matched with errors.Is. Their text is
// written for the person who deploys the server.
var (
	// ErrEngineUnavailable: the engine (or cluster) did not answer.
	ErrEngineUnavailable = errors.New("container engine unreachable")
	// ErrImageMissing: the sandbox image is not present.
	ErrImageMissing = errors.New("sandbox image missing")
	// ErrNotFound: the sandbox does not exist (any more).
	ErrNotFound = errors.New("sandbox not found")
)

// GVisor reports whether an OCI runtime name is gVisor's runsc: "runsc", or a name
// containing "runsc" or "gvisor" (runsc-kvm). Backends adapt the sandbox to it (see
// launcher/docker), and the probes check from inside that the kernel is gVisor's, so a
// misnamed runtime fails them.
func GVisor(runtime string) bool {
	r := strings.ToLower(runtime)
	return strings.Contains(r, "runsc") || strings.Contains(r, "gvisor")
}

// GVisorHostPids is the host's pids limit for a gVisor sandbox whose program may have
// pids tasks: gVisor's kernel counts the program's tasks itself (RLIMIT_NPROC = pids),
// while the host sees the Sentry's, the Gofer's and the stub processes' tasks, about
// 26-40 at rest and 1-2 per guest process (systrap; ~7 with ptrace).
func GVisorHostPids(pids int64) int64 { return 8*pids + 64 }
