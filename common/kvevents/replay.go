package kvevents

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"
)

// vLLM's replay protocol, as its ZmqEventPublisher serves it on the ROUTER
// socket of replay_endpoint (with the topic frame its PR #45177 added,
// released in v0.26.0):
//
//	request, as the ROUTER receives it: [identity, "", start]
//	  start: the first sequence number wanted, 8 bytes big-endian (a REQ
//	  client sends just [start]; a DEALER sends ["", start])
//	answer:  [identity, "", topic, seq, payload]  for every buffered batch
//	                                              whose seq ≥ start, in order
//	then:    [identity, "", "", ReplayEnd, ""]    the end marker
//
// A request of any other shape is ignored. The buffer holds the last
// buffer_steps batches published, so an answer may start after start (the
// rest is gone) or be just the end marker.

// ReplayEnd is the sequence frame of the end marker: -1 as a signed 8-byte
// big-endian integer.
var ReplayEnd = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// A REQ socket takes one reply per request (libzmq's drops any more), so a
// REQ client is answered one batch at a time: its request [start] gets the
// oldest buffered batch with seq ≥ start, [topic, seq, payload], or the end
// marker when there is none; it asks again from seq+1 to go on. A DEALER
// gets vLLM's whole answer to one request.

// replayBuffer keeps the last payloads published, by sequence number: at
// most maxSteps of them and maxBytes of payload all told (the oldest go
// first). Every subscription adds a snapshot of the whole cache, so without
// the byte bound subscribers that come and go would fill maxSteps with
// copies of it.
type replayBuffer struct {
	maxSteps, maxBytes int
	items              []replayed // oldest first, from head on
	head               int
	bytes              int
}

type replayed struct {
	seq     uint64
	payload []byte
}

func (r *replayBuffer) add(seq uint64, payload []byte) {
	if r.maxSteps == 0 {
		return
	}
	r.items = append(r.items, replayed{seq, payload})
	r.bytes += len(payload)
	for r.len() > r.maxSteps || r.bytes > r.maxBytes {
		r.bytes -= len(r.items[r.head].payload)
		r.items[r.head] = replayed{}
		r.head++
	}
	if r.head > len(r.items)/2 { // compact: the slice holds no more than twice what is kept
		r.items = append(r.items[:0], r.items[r.head:]...)
		r.head = 0
	}
}

func (r *replayBuffer) len() int { return len(r.items) - r.head }

// from returns, oldest first, the buffered batches whose seq ≥ start, at
// most limit of them (limit ≤ 0: all).
func (r *replayBuffer) from(start uint64, limit int) []replayed {
	var out []replayed
	for _, it := range r.items[r.head:] {
		if it.seq >= start {
			out = append(out, it)
			if len(out) == limit {
				break
			}
		}
	}
	return out
}

// maxReplayRequest bounds a replay request: [delimiter, start].
const maxReplayRequest = 1 << 10

func (p *Publisher) listenReplay(endpoint string) error {
	network, addr, err := splitEndpoint(endpoint)
	if err != nil {
		return err
	}
	if p.rln, err = net.Listen(network, addr); err != nil {
		return fmt.Errorf("kvevents: bind replay %s: %w", endpoint, err)
	}
	p.wg.Add(1)
	go p.accept(p.rln, func(c net.Conn, server bool) { p.serveReplay(c, server) })
	return nil
}

// ReplayAddr returns the address the replay socket listens on, or "".
func (p *Publisher) ReplayAddr() string {
	if p.rln == nil {
		return ""
	}
	return p.rln.Addr().String()
}

// serveReplay answers one replay client's requests until its connection
// ends; each write has WriteTimeout, so a client that stops reading is
// dropped and holds up no one else. At most MaxSubscribers replay clients
// are served at once; one more is refused (counted with the subscribers).
func (p *Publisher) serveReplay(c net.Conn, server bool) {
	p.mu.Lock()
	full := p.replays >= p.opts.MaxSubscribers
	if full {
		p.refused++
	} else {
		p.replays++
	}
	p.mu.Unlock()
	if full {
		return
	}
	defer func() {
		p.mu.Lock()
		p.replays--
		p.mu.Unlock()
	}()
	peer, err := handshake(c, zmq4.Router, server, handshakeTimeout)
	if err != nil {
		return
	}
	send := func(frames ...[]byte) bool {
		return c.SetWriteDeadline(time.Now().Add(p.opts.WriteTimeout)) == nil && writeAll(c, encodeMsg(frames...))
	}
	r := bufio.NewReader(c)
	for {
		req, cmd, err := readMsg(r, maxReplayRequest)
		if err != nil {
			return
		}
		// As vLLM: only [identity, "", start] is a request, which is what
		// ROUTER makes of ["", start] on the wire, from a DEALER or a REQ.
		if cmd != "" || len(req) != 2 || len(req[0]) != 0 {
			continue
		}
		limit := 0
		if peer == string(zmq4.Req) {
			limit = 1
		}
		p.mu.Lock()
		items := p.buf.from(startSeq(req[1]), limit)
		p.mu.Unlock()
		for _, it := range items {
			if !send(nil, p.topic, binary.BigEndian.AppendUint64(nil, it.seq), it.payload) {
				return
			}
		}
		if (len(items) < limit || limit == 0) && !send(nil, nil, ReplayEnd, nil) {
			return
		}
	}
}

func writeAll(c net.Conn, b []byte) bool {
	_, err := c.Write(b)
	return err == nil
}

// startSeq reads the request's start as vLLM does, a big-endian unsigned
// integer of any length; one past uint64 asks for nothing buffered.
func startSeq(b []byte) uint64 {
	for len(b) > 8 {
		if b[0] != 0 {
			return math.MaxUint64
		}
		b = b[1:]
	}
	var n uint64
	for _, c := range b {
		n = n<<8 | uint64(c)
	}
	return n
}

// Replayed is one batch a replay answered, with its sequence number.
type Replayed struct {
	Topic   string
	Seq     uint64
	Payload []byte
}

// Replay asks the replay socket at endpoint for every buffered batch from
// start on, through a DEALER socket as llm-d's indexer does, and returns
// them in order once the end marker arrives.
func Replay(ctx context.Context, endpoint string, start uint64) ([]Replayed, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := zmq4.NewDealer(ctx)
	defer d.Close()
	if err := d.Dial(strings.Replace(endpoint, "*", "127.0.0.1", 1)); err != nil {
		return nil, err
	}
	if err := d.SendMulti(zmq4.NewMsgFrom(nil, binary.BigEndian.AppendUint64(nil, start))); err != nil {
		return nil, err
	}
	var out []Replayed
	for {
		m, err := d.Recv()
		if err != nil {
			return out, err
		}
		f := m.Frames
		if len(f) > 0 && len(f[0]) == 0 {
			f = f[1:] // the empty delimiter
		}
		if len(f) != 3 || len(f[1]) != 8 {
			return out, fmt.Errorf("kvevents: a replay answer has [topic, seq, payload], have %d frames", len(f))
		}
		if string(f[1]) == string(ReplayEnd) {
			if len(f[2]) != 0 {
				return out, errors.New("kvevents: the replay end marker carries a payload")
			}
			return out, nil
		}
		out = append(out, Replayed{Topic: string(f[0]), Seq: binary.BigEndian.Uint64(f[1]), Payload: f[2]})
	}
}
