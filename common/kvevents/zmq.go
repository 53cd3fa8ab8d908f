package kvevents

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// Publisher sends batches on a ZeroMQ PUB socket the way vLLM's
// ZmqEventPublisher does: every message has three frames, the topic, an
// 8-byte big-endian sequence number counting from 0, and the EncodeVLLM
// payload. A subscriber that sees a gap in the sequence knows it lost
// batches (PUB drops them while no subscriber is connected, or when one
// falls behind) and should resynchronise; vLLM offers a replay socket for
// that, this engine its /v1/kv_events stream, whose first batch is the
// whole cache.
type Publisher struct {
	sock  zmq4.Socket
	topic []byte
	enc   Encoding
	ctx   context.Context
	stop  context.CancelFunc
	mu    sync.Mutex
	seq   uint64
	dials sync.WaitGroup
}

// NewPublisher opens a PUB socket on endpoint. It binds when the endpoint
// names a wildcard (tcp://*:5557) or a local transport (ipc://, inproc://)
// and connects otherwise, vLLM's rule ("bind stable, connect volatile"): a
// cluster indexer such as llm-d's binds one SUB socket and every replica
// connects to it. Connecting goes on in the background until it succeeds,
// and again after the subscriber restarts; batches published meanwhile are
// dropped, as PUB does with no subscriber.
func NewPublisher(endpoint, topic string, enc Encoding) (*Publisher, error) {
	ctx, stop := context.WithCancel(context.Background())
	p := &Publisher{
		topic: []byte(topic), enc: enc, ctx: ctx, stop: stop,
		sock: zmq4.NewPub(ctx, zmq4.WithDialerRetry(200*time.Millisecond), zmq4.WithDialerMaxRetries(-1), zmq4.WithAutomaticReconnect(true)),
	}
	if bindable(endpoint) {
		if err := p.sock.Listen(endpoint); err != nil {
			stop()
			return nil, fmt.Errorf("kvevents: bind %s: %w", endpoint, err)
		}
		return p, nil
	}
	if !strings.HasPrefix(endpoint, "tcp://") {
		stop()
		return nil, fmt.Errorf("kvevents: endpoint %q: want tcp://host:port, tcp://*:port, ipc:// or inproc://", endpoint)
	}
	p.dials.Add(1)
	go func() {
		defer p.dials.Done()
		_ = p.sock.Dial(endpoint) // retries until it connects or Close cancels ctx
	}()
	return p, nil
}

func bindable(endpoint string) bool {
	return strings.Contains(endpoint, "*") || strings.Contains(endpoint, "::") ||
		strings.HasPrefix(endpoint, "ipc://") || strings.HasPrefix(endpoint, "inproc://")
}

// Addr returns the address a binding publisher listens on (useful with
// port 0), or nil for a connecting one.
func (p *Publisher) Addr() string {
	if a := p.sock.Addr(); a != nil {
		return a.String()
	}
	return ""
}

// Publish sends b with the next sequence number. Publishing is safe from
// several goroutines; the numbers follow the order of the calls.
func (p *Publisher) Publish(b Batch) error {
	payload, err := EncodeVLLM(b, p.enc)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	seq := binary.BigEndian.AppendUint64(nil, p.seq)
	p.seq++
	return p.sock.SendMulti(zmq4.NewMsgFrom(p.topic, seq, payload))
}

// Close stops connecting and closes the socket.
func (p *Publisher) Close() error {
	p.stop()
	p.dials.Wait()
	return p.sock.Close()
}
