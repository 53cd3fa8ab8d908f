package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// PublisherOptions configures a Publisher, with the names of vLLM's
// KVEventsConfig where there is one.
type PublisherOptions struct {
	// Endpoint is the PUB socket's address (vLLM's endpoint): tcp://*:5557
	// binds, tcp://host:5557 connects (see NewPublisher).
	Endpoint string
	// Topic is the first frame of every message (vLLM's topic). llm-d's
	// indexer wants kv@<address:port>@<model>.
	Topic    string
	Encoding Encoding
	// ReplayEndpoint, when set, binds a ROUTER socket that answers vLLM's
	// replay requests from the last BufferSteps batches (vLLM's
	// replay_endpoint and buffer_steps; see replay.go).
	ReplayEndpoint string
	BufferSteps    int
}

// Publisher sends batches on a ZeroMQ PUB socket the way vLLM's
// ZmqEventPublisher does: every message has three frames, the topic, an
// 8-byte big-endian sequence number counting from 0, and the EncodeVLLM
// payload. A subscriber that sees a gap in the sequence lost batches (PUB
// drops what it sends while no subscriber is connected, or to one that
// falls behind); it can ask the replay socket for them, or wait for the
// next snapshot.
//
// Subscriptions reports each subscriber whose subscription has reached the
// socket (zmq_watch.go says how that is noticed): a batch published after
// the report reaches it. The server publishes the whole cache then, which is
// how a subscriber that connects late, or again, learns what is cached.
type Publisher struct {
	sock   zmq4.Socket
	replay zmq4.Socket
	topic  []byte
	enc    Encoding
	ctx    context.Context
	stop   context.CancelFunc
	w      *watch
	wg     sync.WaitGroup

	mu     sync.Mutex
	seq    uint64
	buf    replayBuffer
	closed bool

	subsMu     sync.Mutex
	subs       chan struct{}
	subsClosed bool
}

// ErrPublisherClosed is Publish's error once Close has run.
var ErrPublisherClosed = errors.New("kvevents: the publisher is closed")

// dialRetry is how long a connecting publisher waits between attempts.
const dialRetry = 200 * time.Millisecond

// NewPublisher opens a PUB socket on opts.Endpoint. It binds when the
// endpoint names a wildcard (tcp://*:5557) or a local transport (ipc://,
// inproc://) and connects otherwise, vLLM's rule ("bind stable, connect
// volatile"): a cluster indexer may bind one SUB socket that every replica
// connects to. Connecting goes on in the background until it succeeds, and
// again whenever the connection ends (the subscriber restarted); batches
// published meanwhile are dropped, as PUB does with no subscriber.
func NewPublisher(opts PublisherOptions) (*Publisher, error) {
	if opts.BufferSteps < 0 {
		return nil, fmt.Errorf("kvevents: buffer steps must be ≥ 0, have %d", opts.BufferSteps)
	}
	bind := bindable(opts.Endpoint)
	if !bind && !strings.HasPrefix(opts.Endpoint, "tcp://") {
		return nil, fmt.Errorf("kvevents: endpoint %q: want tcp://host:port, tcp://*:port, ipc:// or inproc://", opts.Endpoint)
	}
	ep, _, err := watchedEndpoint(opts.Endpoint)
	if err != nil {
		return nil, err
	}
	p := &Publisher{topic: []byte(opts.Topic), enc: opts.Encoding, subs: make(chan struct{}, 1)}
	p.w = &watch{subscribed: p.notifySubscribed}
	p.ctx, p.stop = context.WithCancel(context.WithValue(context.Background(), watchKey{}, p.w))
	if opts.ReplayEndpoint != "" {
		p.buf = replayBuffer{max: opts.BufferSteps}
	}
	// No zmq4 automatic reconnect: the dial loop below reconnects, and
	// stops before Close (zmq4's own redial races with Close).
	p.sock = zmq4.NewPub(p.ctx, zmq4.WithDialerRetry(dialRetry), zmq4.WithDialerMaxRetries(-1))
	if bind {
		if err := p.sock.Listen(ep); err != nil {
			p.stop()
			p.sock.Close()
			return nil, fmt.Errorf("kvevents: bind %s: %w", opts.Endpoint, err)
		}
	} else {
		p.wg.Add(1)
		go p.dialLoop(ep)
	}
	if opts.ReplayEndpoint != "" {
		if err := p.listenReplay(opts.ReplayEndpoint); err != nil {
			p.Close()
			return nil, err
		}
	}
	return p, nil
}

func bindable(endpoint string) bool {
	return strings.Contains(endpoint, "*") || strings.Contains(endpoint, "::") ||
		strings.HasPrefix(endpoint, "ipc://") || strings.HasPrefix(endpoint, "inproc://")
}

// dialLoop connects, waits for the connection to end, and connects again,
// until Close.
func (p *Publisher) dialLoop(ep string) {
	defer p.wg.Done()
	for {
		err := p.sock.Dial(ep) // retries every dialRetry until it connects or ctx ends
		if p.ctx.Err() != nil {
			return
		}
		if c := p.w.dialed(); err == nil && c != nil {
			select {
			case <-c.done:
			case <-p.ctx.Done():
				return
			}
		}
		select {
		case <-time.After(dialRetry):
		case <-p.ctx.Done():
			return
		}
	}
}

// notifySubscribed records that a subscription is in effect. Reports that
// arrive before the previous one is taken merge into one: a batch published
// after taking it reaches every subscriber reported so far.
func (p *Publisher) notifySubscribed() {
	p.subsMu.Lock()
	defer p.subsMu.Unlock()
	if p.subsClosed {
		return
	}
	select {
	case p.subs <- struct{}{}:
	default:
	}
}

// Subscriptions delivers a value each time subscribers' subscriptions have
// reached the socket since the last value was taken, and is closed by
// Close. A subscription made before the call is not lost: it waits in the
// channel.
func (p *Publisher) Subscriptions() <-chan struct{} { return p.subs }

// Addr returns the address a binding publisher listens on (useful with
// port 0), or "" for a connecting one.
func (p *Publisher) Addr() string {
	if a := p.sock.Addr(); a != nil {
		return a.String()
	}
	return ""
}

// Publish sends b with the next sequence number, and keeps it for replay.
// Publishing is safe from several goroutines; the numbers follow the order
// of the calls.
func (p *Publisher) Publish(b Batch) error {
	payload, err := EncodeVLLM(b, p.enc)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrPublisherClosed
	}
	seq := p.seq
	p.seq++
	err = p.sock.SendMulti(zmq4.NewMsgFrom(p.topic, binary.BigEndian.AppendUint64(nil, seq), payload))
	p.buf.add(seq, payload)
	return err
}

// Close stops connecting and answering replays, and closes the sockets.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.subsMu.Lock()
	p.subsClosed = true
	close(p.subs)
	p.subsMu.Unlock()
	p.stop()
	p.wg.Wait()
	err := p.sock.Close()
	if p.replay != nil {
		if e := p.replay.Close(); err == nil {
			err = e
		}
	}
	return err
}
