package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
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

// replayBuffer keeps the last max payloads published, by sequence number.
type replayBuffer struct {
	max   int
	items []replayed // a ring once full
	head  int        // index of the oldest item once full
}

type replayed struct {
	seq     uint64
	payload []byte
}

func (r *replayBuffer) add(seq uint64, payload []byte) {
	if r.max == 0 {
		return
	}
	if len(r.items) < r.max {
		r.items = append(r.items, replayed{seq, payload})
		return
	}
	r.items[r.head] = replayed{seq, payload}
	r.head = (r.head + 1) % r.max
}

// from returns, oldest first, the buffered batches whose seq ≥ start.
func (r *replayBuffer) from(start uint64) []replayed {
	var out []replayed
	for i := range r.items {
		it := r.items[(r.head+i)%len(r.items)]
		if it.seq >= start {
			out = append(out, it)
		}
	}
	return out
}

func (p *Publisher) listenReplay(endpoint string) error {
	p.replay = zmq4.NewRouter(p.ctx, zmq4.WithTimeout(30*time.Second))
	if err := p.replay.Listen(endpoint); err != nil {
		return fmt.Errorf("kvevents: bind replay %s: %w", endpoint, err)
	}
	p.wg.Add(1)
	go p.serveReplay()
	return nil
}

// ReplayAddr returns the address the replay socket listens on, or "".
func (p *Publisher) ReplayAddr() string {
	if p.replay == nil {
		return ""
	}
	if a := p.replay.Addr(); a != nil {
		return a.String()
	}
	return ""
}

func (p *Publisher) serveReplay() {
	defer p.wg.Done()
	for {
		req, err := p.replay.Recv()
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			continue
		}
		if len(req.Frames) != 3 {
			continue // as vLLM: only [identity, "", start] is a request
		}
		id, start := req.Frames[0], startSeq(req.Frames[2])
		p.mu.Lock()
		items := p.buf.from(start)
		p.mu.Unlock()
		for _, it := range items {
			if p.replay.SendMulti(zmq4.NewMsgFrom(id, nil, p.topic, binary.BigEndian.AppendUint64(nil, it.seq), it.payload)) != nil {
				break
			}
		}
		_ = p.replay.SendMulti(zmq4.NewMsgFrom(id, nil, nil, ReplayEnd, nil))
	}
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
