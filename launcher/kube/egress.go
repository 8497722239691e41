package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Egress on this backend (docs/kubernetes.md, "Egress profiles"): a pod with a
// profile has no network but lo, and its bootstrap's relay (boot.py, egress_relay) takes
// its upstream connections from streams the server opens through the API server's
// pods/portforward to the pod's loopback port backend.EgressTunnelPort. Each stream waits
// there until the program opens a connection to the relay, which then writes "O" on it;
// the server hands the rest of the stream to the pod's channel (Spec.EgressConns) and
// opens another. Only the server's ServiceAccount can open such a stream, and a stream to
// a pod reaches that pod alone: the channel it is handed to is the one opened for it.

// tunnelsWaiting is how many streams wait in a pod's relay for its program's next
// connections.
const tunnelsWaiting = 2

// tunnels carries one pod's egress connections until ctx ends.
type tunnels struct {
	b   *Backend
	pod string
	srv backend.EgressServer

	mu   sync.Mutex
	conn httpstream.Connection // the pod's port-forward connection; nil until dialled
	next atomic.Int64          // requestID of the next stream pair
}

// runTunnels keeps tunnelsWaiting streams waiting in pod's relay until ctx ends.
func (b *Backend) runTunnels(ctx context.Context, pod string, srv backend.EgressServer) {
	t := &tunnels{b: b, pod: pod, srv: srv}
	var wg sync.WaitGroup
	for range tunnelsWaiting {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.wait(ctx)
		}()
	}
	wg.Wait()
	t.mu.Lock()
	if t.conn != nil {
		t.conn.Close()
	}
	t.mu.Unlock()
}

// wait opens a stream, waits for the relay's "O", serves the connection and opens the
// next, until ctx ends. A stream that fails (the relay not listening yet, the pod gone)
// is retried after a pause that grows to a second.
func (t *tunnels) wait(ctx context.Context) {
	pause := 20 * time.Millisecond
	for ctx.Err() == nil {
		conn, err := t.open(ctx)
		if err == nil {
			pause = 20 * time.Millisecond
			go t.srv.ServeEgress(conn)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// open opens one stream to the relay's tunnel port and returns it once the relay has
// paired it with a connection of the program's.
func (t *tunnels) open(ctx context.Context) (net.Conn, error) {
	pf, err := t.dial()
	if err != nil {
		return nil, err
	}
	id := strconv.FormatInt(t.next.Add(1), 10)
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(backend.EgressTunnelPort))
	h.Set(corev1.PortForwardRequestIDHeader, id)
	errStream, err := pf.CreateStream(h)
	if err != nil {
		t.drop(pf)
		return nil, fmt.Errorf("port-forward error stream: %w", err)
	}
	errStream.Close() // nothing is written on it
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := pf.CreateStream(h)
	if err != nil {
		pf.RemoveStreams(errStream)
		t.drop(pf)
		return nil, fmt.Errorf("port-forward data stream: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { data.Reset() })
	defer stop()
	go func() {
		// The runtime reports a failed dial (nothing listening yet) here.
		if msg, _ := io.ReadAll(errStream); len(msg) > 0 {
			data.Reset()
		}
	}()
	var b [1]byte
	if _, err := io.ReadFull(data, b[:]); err != nil || b[0] != 'O' {
		data.Reset()
		pf.RemoveStreams(errStream, data)
		if err == nil {
			err = errors.New("the relay answered an unexpected byte")
		}
		return nil, fmt.Errorf("egress stream to pod %s: %w", t.pod, err)
	}
	return &streamConn{s: data, release: func() { pf.RemoveStreams(errStream, data) }}, nil
}

// dial returns the pod's port-forward connection, dialling it when there is none or
// the last one closed.
func (t *tunnels) dial() (httpstream.Connection, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conn != nil {
		select {
		case <-t.conn.CloseChan():
			t.conn = nil
		default:
			return t.conn, nil
		}
	}
	rt, up, err := spdy.RoundTripperFor(t.b.cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward transport: %w", err)
	}
	req := t.b.core.RESTClient().Post().Namespace(t.b.opts.Namespace).Resource("pods").Name(t.pod).SubResource("portforward")
	c, _, err := spdy.NewDialer(up, &http.Client{Transport: rt}, http.MethodPost, req.URL()).Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, fmt.Errorf("port-forward to pod %s: %w", t.pod, err)
	}
	t.conn = c
	return c, nil
}

// drop forgets pf if it is the current connection, so that the next open dials again.
func (t *tunnels) drop(pf httpstream.Connection) {
	t.mu.Lock()
	if t.conn == pf {
		t.conn = nil
	}
	t.mu.Unlock()
	pf.Close()
}

// streamConn is a port-forward data stream as the net.Conn the proxy serves: Close
// resets the stream (both ways), CloseWrite half-closes it, and deadlines are timers
// that reset it (the proxy's only use: the time limit on a request's head).
type streamConn struct {
	s       httpstream.Stream
	release func()

	mu     sync.Mutex
	timers [2]*time.Timer // read, write
	once   sync.Once
}

func (c *streamConn) Read(p []byte) (int, error)  { return c.s.Read(p) }
func (c *streamConn) Write(p []byte) (int, error) { return c.s.Write(p) }
func (c *streamConn) CloseWrite() error           { return c.s.Close() }

func (c *streamConn) Close() error {
	c.once.Do(func() {
		c.mu.Lock()
		for _, tm := range c.timers {
			if tm != nil {
				tm.Stop()
			}
		}
		c.mu.Unlock()
		_ = c.s.Reset()
		c.release()
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr  { return tunnelAddr{} }
func (c *streamConn) RemoteAddr() net.Addr { return tunnelAddr{} }

func (c *streamConn) SetDeadline(t time.Time) error {
	c.deadline(0, t)
	c.deadline(1, t)
	return nil
}
func (c *streamConn) SetReadDeadline(t time.Time) error  { c.deadline(0, t); return nil }
func (c *streamConn) SetWriteDeadline(t time.Time) error { c.deadline(1, t); return nil }

func (c *streamConn) deadline(i int, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timers[i] != nil {
		c.timers[i].Stop()
		c.timers[i] = nil
	}
	if !t.IsZero() {
		c.timers[i] = time.AfterFunc(time.Until(t), func() { _ = c.s.Reset() })
	}
}

// tunnelAddr is a streamConn's address: a pod's relay, over the API server.
type tunnelAddr struct{}

func (tunnelAddr) Network() string { return "portforward" }
func (tunnelAddr) String() string  { return "pod-relay" }
