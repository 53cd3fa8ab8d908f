package httpx

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// Listener returns ln with at most max connections open at once. A
// connection accepted while max are open is answered at once with a 503
// (code too_many_connections, Retry-After: 1) and closed; it never reaches
// the server. So the process holds at most max client descriptors (plus
// the few being refused), and a client over the cap gets an answer it can
// read instead of waiting.
//
// golang.org/x/net/netutil.LimitListener bounds connections too, but by
// not calling Accept while full: a connection over the cap then waits in
// the kernel's backlog, unanswered, with nothing to tell the client why,
// until a slot frees or its own timeout fires — a load balancer's health
// check against a full server just hangs. Refusing with a status says what
// happened.
func Listener(ln net.Listener, max int) net.Listener {
	return &limitListener{Listener: ln, max: max, open: make(chan struct{}, max), refusing: make(chan struct{}, refusers)}
}

// refusers bounds the connections being refused at once; beyond it an
// over-cap connection is closed without an answer.
const refusers = 64

type limitListener struct {
	net.Listener
	max      int
	open     chan struct{} // one token per open connection
	refusing chan struct{} // one token per connection being refused
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.open <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.open }}, nil
		default:
		}
		select {
		case l.refusing <- struct{}{}:
			go func() {
				defer func() { <-l.refusing }()
				l.refuse(c)
			}()
		default:
			c.Close()
		}
	}
}

// refuse answers c with a 503 and closes it. The request the client may
// already have sent is read and dropped first (for at most a second): a
// socket closed with unread bytes resets the connection, and the client
// would see the reset instead of the answer.
func (l *limitListener) refuse(c net.Conn) {
	defer c.Close()
	body := fmt.Sprintf(`{"error":{"message":"the server has %d connections open, its -max-conns; try again later","type":"server_error","code":"too_many_connections"}}`+"\n", l.max)
	_ = c.SetDeadline(time.Now().Add(time.Second))
	_, err := fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if err != nil {
		return
	}
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	buf := make([]byte, 4096)
	for range 16 { // at most 64 KiB, within the deadline
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// limitConn gives its slot back when it is closed, once.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// CloseWrite passes a half-close on: net/http uses it to end a connection
// gracefully.
func (c *limitConn) CloseWrite() error {
	if tc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return tc.CloseWrite()
	}
	return c.Conn.Close()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
