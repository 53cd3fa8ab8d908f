package kvevents

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// The publisher's sockets own their connections: zmq4 runs the ZMTP 3.0
// greeting and NULL handshake (zmq4.Open), and from then on the publisher
// reads and writes the frames itself, so that it decides what happens to a
// peer that stops reading (zmq.go says what). ZMTP framing (RFC 23): a
// flags byte (MORE, LONG, COMMAND), a size of 1 byte or, when LONG, 8 bytes
// big-endian, and the body.
const (
	zmtpMore    = 0x01
	zmtpLong    = 0x02
	zmtpCommand = 0x04
)

// appendFrame appends one frame of body to b.
func appendFrame(b []byte, flags byte, body []byte) []byte {
	if len(body) > 255 {
		b = append(b, flags|zmtpLong)
		b = binary.BigEndian.AppendUint64(b, uint64(len(body)))
	} else {
		b = append(b, flags, byte(len(body)))
	}
	return append(b, body...)
}

// encodeMsg returns the bytes of a message of frames, ready to write.
func encodeMsg(frames ...[]byte) []byte {
	n := 0
	for _, f := range frames {
		n += 9 + len(f)
	}
	b := make([]byte, 0, n)
	for i, f := range frames {
		var flags byte
		if i < len(frames)-1 {
			flags = zmtpMore
		}
		b = appendFrame(b, flags, f)
	}
	return b
}

// encodeCmd returns the bytes of the command name with data.
func encodeCmd(name string, data []byte) []byte {
	body := append(append([]byte{byte(len(name))}, name...), data...)
	return appendFrame(nil, zmtpCommand, body)
}

// readMsg reads one message, or one command (cmd is then its name and
// frames its data), refusing one whose frames add up to more than max bytes
// before reading their bodies: a peer cannot make us allocate what it
// merely announces.
func readMsg(r io.Reader, max int) (frames [][]byte, cmd string, err error) {
	total := 0
	for {
		var hdr [9]byte
		if _, err := io.ReadFull(r, hdr[:2]); err != nil {
			return nil, "", err
		}
		size := uint64(hdr[1])
		if hdr[0]&zmtpLong != 0 {
			if _, err := io.ReadFull(r, hdr[2:]); err != nil {
				return nil, "", err
			}
			size = binary.BigEndian.Uint64(hdr[1:])
		}
		if size > uint64(max-total) {
			return nil, "", fmt.Errorf("kvevents: a peer's message exceeds %d bytes", max)
		}
		total += int(size)
		body := make([]byte, size)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, "", err
		}
		if hdr[0]&zmtpCommand != 0 {
			if len(body) == 0 || int(body[0]) > len(body)-1 {
				return nil, "", fmt.Errorf("kvevents: a malformed ZMTP command")
			}
			return [][]byte{body[1+body[0]:]}, string(body[1 : 1+body[0]]), nil
		}
		frames = append(frames, body)
		if hdr[0]&zmtpMore == 0 {
			return frames, "", nil
		}
	}
}

// handshake runs the ZMTP greeting and NULL handshake on c as a socket of
// type typ within timeout (a peer that connects and says nothing is
// dropped then), and returns the peer's socket type (REQ, DEALER, SUB, …).
// zmq4.Open refuses a peer whose type cannot talk to typ.
func handshake(c net.Conn, typ zmq4.SocketType, server bool, timeout time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	zc, err := zmq4.Open(c, null.Security(), typ, nil, server, nil)
	if err != nil {
		return "", err
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return "", err
	}
	for k, v := range zc.Peer.Meta {
		if strings.EqualFold(k, "Socket-Type") {
			return strings.ToUpper(v), nil
		}
	}
	return "", nil
}

// splitEndpoint turns a ZeroMQ endpoint into what net.Listen and net.Dial
// take: tcp://host:port (tcp://*:port for every interface) and ipc://path
// (a Unix socket).
func splitEndpoint(endpoint string) (network, addr string, err error) {
	scheme, rest, _ := strings.Cut(endpoint, "://")
	switch scheme {
	case "tcp":
		if strings.HasPrefix(rest, "*:") {
			rest = rest[1:]
		}
		if _, _, err := net.SplitHostPort(rest); err != nil {
			return "", "", fmt.Errorf("kvevents: endpoint %q: %w", endpoint, err)
		}
		return "tcp", rest, nil
	case "ipc":
		if rest == "" {
			return "", "", fmt.Errorf("kvevents: endpoint %q names no path", endpoint)
		}
		return "unix", rest, nil
	}
	return "", "", fmt.Errorf("kvevents: endpoint %q: want tcp://host:port, tcp://*:port or ipc://path", endpoint)
}
