package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// PublisherOptions configures a Publisher, with the names of vLLM's
// KVEventsConfig where there is one. A zero limit takes its default.
type PublisherOptions struct {
	// Endpoint is the PUB socket's address (vLLM's endpoint): tcp://*:5557
	// binds, tcp://host:5557 connects (see NewPublisher).
	Endpoint string
	// Topic is the first frame of every message (vLLM's topic). llm-d's
	// indexer wants kv@<address:port>@<model>.
	Topic    string
	Encoding Encoding
	// ReplayEndpoint, when set, binds a ROUTER socket that answers vLLM's
	// replay requests from the last BufferSteps batches, at most
	// BufferBytes of payload (vLLM's replay_endpoint and buffer_steps; see
	// replay.go).
	ReplayEndpoint string
	BufferSteps    int
	BufferBytes    int

	// HWM is how many messages may wait for one subscriber (libzmq's
	// ZMQ_SNDHWM): what is published while its queue is full is dropped
	// for that subscriber alone, and counted (Stats).
	HWM int
	// WriteTimeout bounds each write to a peer: a subscriber (or replay
	// client) that takes nothing for this long is disconnected.
	WriteTimeout time.Duration
	// Linger is how long Close lets subscribers' queues drain.
	Linger time.Duration
	// MaxSubscribers bounds the subscribers connected at once, and the
	// replay clients; one more is refused (its connection closed).
	MaxSubscribers int
	// DialRetry is how long a connecting publisher waits between attempts.
	DialRetry time.Duration
}

// The defaults of PublisherOptions' limits.
const (
	DefaultHWM            = 1000 // libzmq's ZMQ_SNDHWM default
	DefaultWriteTimeout   = 10 * time.Second
	DefaultLinger         = time.Second
	DefaultMaxSubscribers = 64
	DefaultBufferBytes    = 64 << 20
	defaultDialRetry      = 200 * time.Millisecond
	// handshakeTimeout bounds a peer's ZMTP greeting and handshake.
	handshakeTimeout = 10 * time.Second
)

func (o *PublisherOptions) defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.HWM, DefaultHWM)
	def(&o.MaxSubscribers, DefaultMaxSubscribers)
	def(&o.BufferBytes, DefaultBufferBytes)
	for _, d := range []struct {
		v *time.Duration
		d time.Duration
	}{{&o.WriteTimeout, DefaultWriteTimeout}, {&o.Linger, DefaultLinger}, {&o.DialRetry, defaultDialRetry}} {
		if *d.v == 0 {
			*d.v = d.d
		}
	}
}

// Publisher sends batches on a ZeroMQ PUB socket the way vLLM's
// ZmqEventPublisher does: every message has three frames, the topic, an
// 8-byte big-endian sequence number counting from 0, and the EncodeVLLM
// payload. A subscriber that sees a gap in the sequence lost batches (PUB
// drops what it sends while no subscriber is connected, or to one that
// falls behind); it can ask the replay socket for them, or wait for the
// next snapshot.
//
// Publishing never waits for a subscriber. Each one has a queue of HWM
// messages and a goroutine that writes them, each write under WriteTimeout:
// a message published while a subscriber's queue is full is dropped for it
// and counted, as libzmq's PUB does at its high-water mark, and one that
// takes nothing for WriteTimeout is disconnected (a libzmq or zmq4 SUB then
// reconnects, and gets the snapshot below). Close waits at most Linger for
// the queues to drain and then closes every connection.
//
// Subscriptions reports each subscriber whose subscription has reached the
// socket: a batch published after the report reaches it. The server
// publishes the whole cache then, which is how a subscriber that connects
// late, or again, learns what is cached.
type Publisher struct {
	opts  PublisherOptions
	topic []byte
	ctx   context.Context
	stop  context.CancelFunc
	ln    net.Listener // a binding publisher's
	rln   net.Listener // the replay socket's
	wg    sync.WaitGroup

	mu      sync.Mutex
	seq     uint64
	buf     replayBuffer
	closed  bool
	conns   map[net.Conn]struct{} // every connection open, closed by Close
	peers   map[*subscriber]struct{}
	nextID  uint64
	dropped uint64 // by every subscriber, gone ones included
	cut     uint64 // subscribers disconnected by WriteTimeout
	refused uint64 // connections over MaxSubscribers
	replays int    // replay clients connected

	subsMu     sync.Mutex
	subs       chan struct{}
	subsClosed bool
}

// ErrPublisherClosed is Publish's error once Close has run.
var ErrPublisherClosed = errors.New("kvevents: the publisher is closed")

// NewPublisher opens a PUB socket on opts.Endpoint. It binds when the
// endpoint names a wildcard (tcp://*:5557, tcp://[::]:5557) or is ipc://,
// and connects otherwise, vLLM's rule ("bind stable, connect volatile"): a
// cluster indexer may bind one SUB socket that every replica connects to.
// Connecting goes on in the background until it succeeds, and again
// whenever the connection ends (the subscriber restarted); batches
// published meanwhile are dropped, as PUB does with no subscriber.
func NewPublisher(opts PublisherOptions) (*Publisher, error) {
	for _, l := range []struct {
		name string
		v    int
	}{{"buffer steps", opts.BufferSteps}, {"buffer bytes", opts.BufferBytes}, {"HWM", opts.HWM}, {"max subscribers", opts.MaxSubscribers}} {
		if l.v < 0 {
			return nil, fmt.Errorf("kvevents: %s must be ≥ 0, have %d", l.name, l.v)
		}
	}
	if opts.WriteTimeout < 0 || opts.Linger < 0 || opts.DialRetry < 0 {
		return nil, fmt.Errorf("kvevents: write timeout, linger and dial retry must be ≥ 0")
	}
	opts.defaults()
	network, addr, err := splitEndpoint(opts.Endpoint)
	if err != nil {
		return nil, err
	}
	p := &Publisher{
		opts: opts, topic: []byte(opts.Topic), subs: make(chan struct{}, 1),
		conns: map[net.Conn]struct{}{}, peers: map[*subscriber]struct{}{},
	}
	p.ctx, p.stop = context.WithCancel(context.Background())
	if opts.ReplayEndpoint != "" {
		p.buf = replayBuffer{maxSteps: opts.BufferSteps, maxBytes: opts.BufferBytes}
	}
	if bindable(opts.Endpoint) {
		if p.ln, err = net.Listen(network, addr); err != nil {
			p.stop()
			return nil, fmt.Errorf("kvevents: bind %s: %w", opts.Endpoint, err)
		}
		p.wg.Add(1)
		go p.accept(p.ln, p.serveSubscriber)
	} else {
		p.wg.Add(1)
		go p.dialLoop(network, addr)
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
		strings.HasPrefix(endpoint, "ipc://")
}

// track records c as open, so that Close closes it; false (c closed) once
// Close has begun.
func (p *Publisher) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Publisher) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// accept hands each connection ln accepts to serve on its own goroutine,
// until ln closes.
func (p *Publisher) accept(ln net.Listener, serve func(net.Conn, bool)) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if p.ctx.Err() != nil || !errors.As(err, &ne) || !ne.Timeout() {
				return // closed
			}
			continue
		}
		if !p.track(c) {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			serve(c, true)
		}()
	}
}

// dialLoop connects, serves the connection until it ends, and connects
// again, until Close: one connection at a time, so a subscriber gets each
// batch once.
func (p *Publisher) dialLoop(network, addr string) {
	defer p.wg.Done()
	var d net.Dialer
	for p.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(p.ctx, handshakeTimeout)
		c, err := d.DialContext(ctx, network, addr)
		cancel()
		if err == nil && p.track(c) {
			p.serveSubscriber(c, false)
			p.untrack(c)
		}
		select {
		case <-time.After(p.opts.DialRetry):
		case <-p.ctx.Done():
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
	if p.ln != nil {
		return p.ln.Addr().String()
	}
	return ""
}

// Publish queues b, with the next sequence number, for every subscriber
// whose subscription matches the topic, and keeps it for replay. It never
// waits for a subscriber (see Publisher). Publishing is safe from several
// goroutines; the numbers follow the order of the calls.
func (p *Publisher) Publish(b Batch) error {
	payload, err := EncodeVLLM(b, p.opts.Encoding)
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
	var msg []byte
	for s := range p.peers {
		if !s.wants(p.topic) {
			continue
		}
		if msg == nil {
			msg = encodeMsg(p.topic, binary.BigEndian.AppendUint64(nil, seq), payload)
		}
		select {
		case s.q <- msg:
		default: // its queue is full: drop it for this subscriber alone
			s.dropped.Add(1)
			p.dropped++
		}
	}
	p.buf.add(seq, payload)
	return nil
}

// SubscriberStats is what one connected subscriber has been sent.
type SubscriberStats struct {
	ID      uint64 // counts subscribers from 1, in the order they connected
	Peer    string // the remote address
	Queued  int    // messages waiting for it
	Dropped uint64 // messages dropped for it at HWM
}

// PublisherStats is a snapshot of a publisher's counters.
type PublisherStats struct {
	Subscribers []SubscriberStats // the ones connected now
	Dropped     uint64            // messages dropped at HWM, for every subscriber since start
	Cut         uint64            // subscribers disconnected for taking nothing for WriteTimeout
	Refused     uint64            // connections refused over MaxSubscribers (subscribers and replay clients)
	// ReplayBatches and ReplayBytes are what the replay buffer holds.
	ReplayBatches, ReplayBytes int
}

// Stats returns the publisher's counters.
func (p *Publisher) Stats() PublisherStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := PublisherStats{Dropped: p.dropped, Cut: p.cut, Refused: p.refused,
		ReplayBatches: p.buf.len(), ReplayBytes: p.buf.bytes}
	for s := range p.peers {
		st.Subscribers = append(st.Subscribers, SubscriberStats{ID: s.id, Peer: s.peer, Queued: len(s.q), Dropped: s.dropped.Load()})
	}
	return st
}

// Close stops connecting and answering replays, lets the subscribers'
// queues drain for at most Linger, and closes every connection: it waits
// on no peer longer than that.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var flushed []chan struct{}
	for s := range p.peers {
		close(s.q) // its writer sends what is queued, then ends
		flushed = append(flushed, s.flushed)
	}
	p.mu.Unlock()
	p.subsMu.Lock()
	p.subsClosed = true
	close(p.subs)
	p.subsMu.Unlock()
	p.stop()
	var err error
	for _, ln := range []net.Listener{p.ln, p.rln} {
		if ln != nil {
			if e := ln.Close(); err == nil {
				err = e
			}
		}
	}
	linger := time.NewTimer(p.opts.Linger)
	defer linger.Stop()
drain:
	for _, f := range flushed {
		select {
		case <-f:
		case <-linger.C:
			break drain
		}
	}
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}
