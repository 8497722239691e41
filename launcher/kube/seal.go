package kube

import (
	"crypto/rand"
	"crypto/sha3"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
)

// The seal: on Kubernetes the container runtime copies every byte a container writes to its
// stdout into the node's log files, attached or not. So the bootstrap (boot.py, when its start
// gate hands it a key) XORs everything it writes to fd 1 with a keystream made from a key of
// this pod alone, and the backend undoes it on the attach stream's stdout. What reaches the
// node's log is the sealed stream; the key travels only on stdin, which is not logged.
//
// Keystream: block i (64 KiB) is SHAKE-256(key || sealLabel || uint64_be(i)); the stream is
// the blocks in order. boot.py's sealer builds the same bytes (hashlib.shake_256).
const (
	sealKeySize = 32
	sealBlock   = 64 << 10
	sealLabel   = "mcp-exec seal v1"
)

// newSealKey returns a fresh random key and its hex form, the start gate's line.
func newSealKey() ([]byte, string, error) {
	key := make([]byte, sealKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, "", fmt.Errorf("making a seal key: %w", err)
	}
	return key, hex.EncodeToString(key), nil
}

// keystream is the seal's keystream, one 64 KiB block cached.
type keystream struct {
	key   []byte
	index uint64 // the cached block's index, valid when block != nil
	block []byte
}

func (k *keystream) blockAt(i uint64) []byte {
	if k.block == nil || k.index != i {
		in := make([]byte, 0, len(k.key)+len(sealLabel)+8)
		in = append(append(in, k.key...), sealLabel...)
		in = binary.BigEndian.AppendUint64(in, i)
		k.block, k.index = sha3.SumSHAKE256(in, sealBlock), i
	}
	return k.block
}

// xorAt sets dst to src XOR the keystream from offset off; dst and src have the same length.
func (k *keystream) xorAt(dst, src []byte, off uint64) {
	for len(src) > 0 {
		b := k.blockAt(off / sealBlock)[off%sealBlock:]
		n := subtle.XORBytes(dst, src, b)
		dst, src, off = dst[n:], src[n:], off+uint64(n)
	}
}

// unsealer undoes the seal on the bootstrap's stdout before passing it on to w. Writes come in
// stream order (the attach stream's stdout copy); the offset is kept across them.
type unsealer struct {
	w   io.Writer
	ks  keystream
	off uint64
	buf []byte
}

func newUnsealer(w io.Writer, key []byte) *unsealer {
	return &unsealer{w: w, ks: keystream{key: key}}
}

func (u *unsealer) Write(p []byte) (int, error) {
	if cap(u.buf) < len(p) {
		u.buf = make([]byte, len(p))
	}
	buf := u.buf[:len(p)]
	u.ks.xorAt(buf, p, u.off)
	n, err := u.w.Write(buf)
	u.off += uint64(n)
	return n, err
}
