package wire

import "encoding/binary"

// Calls reassembles the call stream that C frames carry in chunks of any size: each
// call is u32 length, u32 id, then that many bytes of JSON. Only the decoder's
// goroutine uses it.
type Calls struct {
	max     int
	message func(id uint32, body []byte, size int)

	hdr    [8]byte
	hdrLen int
	size   uint32
	id     uint32
	got    uint32
	body   []byte
	skip   bool
}

// NewCalls returns a reassembler that hands each complete call to message. A call's
// JSON over max bytes is not buffered: message gets a nil body and its size.
func NewCalls(max int, message func(id uint32, body []byte, size int)) *Calls {
	return &Calls{max: max, message: message}
}

// Add takes a chunk of the call stream (a C frame's payload).
func (c *Calls) Add(p []byte) {
	for len(p) > 0 {
		if c.hdrLen < len(c.hdr) {
			n := copy(c.hdr[c.hdrLen:], p)
			c.hdrLen += n
			p = p[n:]
			if c.hdrLen == len(c.hdr) {
				c.size = binary.BigEndian.Uint32(c.hdr[:4])
				c.id = binary.BigEndian.Uint32(c.hdr[4:])
				c.got, c.skip, c.body = 0, int64(c.size) > int64(c.max), []byte{}
				if c.size == 0 {
					c.end()
				}
			}
			continue
		}
		n := min(uint32(len(p)), c.size-c.got)
		if !c.skip {
			c.body = append(c.body, p[:n]...)
		}
		c.got += n
		p = p[n:]
		if c.got == c.size {
			c.end()
		}
	}
}

// end hands over the complete call and resets for the next.
func (c *Calls) end() {
	id, body, size := c.id, c.body, int(c.size)
	if c.skip {
		body = nil
	}
	c.hdrLen, c.body, c.skip = 0, nil, false
	c.message(id, body, size)
}
