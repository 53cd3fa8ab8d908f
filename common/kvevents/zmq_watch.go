package kvevents

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// Noticing subscribers. go-zeromq/zmq4 has no socket monitor, no
// connection callback, and its XPUB keeps subscriptions to itself; a PUB
// socket reports only the union of its peers' topics (Topics), which does
// not change when a second subscriber with the same filter arrives. What it
// does offer is RegisterTransport: a socket dials and listens through a
// named transport, and hands the transport its context. So the publisher's
// sockets use a transport of ours that wraps tcp (and ipc), and every
// connection it makes or accepts is a watchedConn that reads, beside zmq4,
// the ZMTP frames the peer sends: a single-frame message whose body starts
// with 1 is a subscription (ZMTP 3.0, which is what zmq4 speaks and what
// libzmq speaks to it). zmq4 reads each connection on one goroutine, frame
// by frame with io.ReadFull and no read-ahead, and applies a subscription
// before it reads on; so the first Read after a whole subscription frame is
// the moment the subscription is in effect, and from then on a message
// published reaches that subscriber. The same wrapper sees a connection end
// (a read or write error, or Close), which is how a connecting publisher
// knows to dial again.
//
// The limits: this relies on zmq4 reading as described (a change there
// shows up as TestPublisherSnapshotOnSubscribe failing, not as silence in
// production); a ZMTP 3.1 SUBSCRIBE command is not counted (zmq4 does not
// apply those either, so such a peer receives nothing from zmq4 anyway);
// and inproc:// endpoints are not watched.

// watchNames are the transports registered for the watched networks, keyed
// by the scheme they stand in for.
var watchNames = map[string]string{"tcp": "kvlab-watch-tcp", "ipc": "kvlab-watch-ipc"}

var registerWatch = sync.OnceValue(func() error {
	for scheme, name := range watchNames {
		network := scheme
		if scheme == "ipc" {
			network = "unix"
		}
		if err := zmq4.RegisterTransport(name, watchTransport{base: transport.New(network)}); err != nil {
			return fmt.Errorf("kvevents: registering the %s transport: %w", name, err)
		}
	}
	return nil
})

// watchedEndpoint rewrites tcp:// and ipc:// endpoints onto the watched
// transports; ok is false for the others (inproc://), which stay as they are.
func watchedEndpoint(endpoint string) (ep string, ok bool, err error) {
	if err := registerWatch(); err != nil {
		return "", false, err
	}
	scheme, rest, found := strings.Cut(endpoint, "://")
	name, watched := watchNames[scheme]
	if !found || !watched {
		return endpoint, false, nil
	}
	return name + "://" + rest, true, nil
}

// watchKey carries a socket's *watch in its context to the transport.
type watchKey struct{}

// watch is what a publisher learns from its connections.
type watch struct {
	subscribed func() // a subscription is in effect
	mu         sync.Mutex
	lastDialed *watchedConn // the connection the latest successful dial made
}

func (w *watch) dialed() *watchedConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastDialed
}

type watchTransport struct{ base transport.Transport }

func (t watchTransport) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := t.base.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	w, _ := ctx.Value(watchKey{}).(*watch)
	wc := newWatchedConn(c, w)
	if w != nil {
		w.mu.Lock()
		w.lastDialed = wc
		w.mu.Unlock()
	}
	return wc, nil
}

func (t watchTransport) Listen(ctx context.Context, addr string) (net.Listener, error) {
	l, err := t.base.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	w, _ := ctx.Value(watchKey{}).(*watch)
	return watchListener{Listener: l, w: w}, nil
}

func (t watchTransport) Addr(ep string) (string, error) { return t.base.Addr(ep) }

type watchListener struct {
	net.Listener
	w *watch
}

func (l watchListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newWatchedConn(c, l.w), nil
}

// ZMTP framing (RFC 23): a 64-byte greeting, then frames of a flags byte
// (MORE, LONG, COMMAND), a size of 1 byte or, when LONG, 8 bytes big-endian,
// and the body.
const (
	zmtpGreeting = 64
	zmtpMore     = 0x01
	zmtpLong     = 0x02
	zmtpCommand  = 0x04
)

// watchedConn follows the frames its peer sends; see the top of this file.
type watchedConn struct {
	net.Conn
	w    *watch
	done chan struct{} // closed once the connection has ended
	once sync.Once

	// Touched only by the goroutine that reads (zmq4 reads a connection
	// from one goroutine at a time: the handshake, then its reader).
	greeting int     // greeting bytes still to come
	hdr      [9]byte // the header being read
	nhdr     int     // its bytes so far
	body     uint64  // body bytes still to come
	first    bool    // the next body byte is the frame's first
	flags    byte    // the current frame's flags
	cont     bool    // the current frame continues a multi-frame message
	sub      bool    // the current frame is a subscription
	armed    bool    // a whole subscription frame was read
}

func newWatchedConn(c net.Conn, w *watch) *watchedConn {
	return &watchedConn{Conn: c, w: w, done: make(chan struct{}), greeting: zmtpGreeting}
}

func (c *watchedConn) Read(p []byte) (int, error) {
	if c.armed {
		// zmq4 has applied the subscription it read last: it reads on only
		// after handling a whole message.
		c.armed = false
		if c.w != nil && c.w.subscribed != nil {
			c.w.subscribed()
		}
	}
	n, err := c.Conn.Read(p)
	c.scan(p[:n])
	if err != nil {
		c.end()
	}
	return n, err
}

func (c *watchedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.end()
	}
	return n, err
}

func (c *watchedConn) Close() error {
	c.end()
	return c.Conn.Close()
}

func (c *watchedConn) end() { c.once.Do(func() { close(c.done) }) }

// scan advances the frame parser over b, the bytes zmq4 just read.
func (c *watchedConn) scan(b []byte) {
	for len(b) > 0 {
		switch {
		case c.greeting > 0:
			k := min(c.greeting, len(b))
			c.greeting -= k
			b = b[k:]
		case c.body > 0:
			if c.first {
				c.sub = c.flags&(zmtpCommand|zmtpMore) == 0 && !c.cont && b[0] == 1
				c.first = false
			}
			k := min(c.body, uint64(len(b)))
			c.body -= k
			b = b[k:]
			if c.body == 0 {
				c.frameDone()
			}
		default:
			c.hdr[c.nhdr] = b[0]
			c.nhdr++
			b = b[1:]
			need := 2
			if c.hdr[0]&zmtpLong != 0 {
				need = 9
			}
			if c.nhdr < need {
				continue
			}
			c.flags = c.hdr[0]
			if need == 2 {
				c.body = uint64(c.hdr[1])
			} else {
				c.body = binary.BigEndian.Uint64(c.hdr[1:9])
			}
			c.nhdr, c.first, c.sub = 0, true, false
			if c.body == 0 {
				c.frameDone()
			}
		}
	}
}

func (c *watchedConn) frameDone() {
	if c.sub {
		c.armed = true
	}
	c.sub = false
	// Commands are single frames; a message's frames carry MORE but the last.
	c.cont = c.flags&zmtpCommand == 0 && c.flags&zmtpMore != 0
}
