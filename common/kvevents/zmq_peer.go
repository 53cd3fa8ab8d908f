package kvevents

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
)

// subscriber is one SUB peer of a Publisher: a queue of HWM encoded
// messages that its own goroutine writes, and the topics it subscribed to.
// The goroutine that reads it applies its subscriptions.
type subscriber struct {
	id      uint64
	peer    string
	conn    net.Conn
	q       chan []byte   // closed by Publisher.Close
	ctl     chan []byte   // commands to send (PONG), ahead of the queue
	gone    chan struct{} // closed when the reader has ended
	flushed chan struct{} // closed when the writer has ended
	dropped atomic.Uint64

	mu     sync.Mutex
	topics [][]byte
}

// Limits on what a subscriber may send: a subscription is a topic prefix,
// and vLLM's topics are short.
const (
	maxSubscription = 4 << 10
	maxTopics       = 64
)

// wants reports whether a message of topic matches a subscription: a
// prefix, as in ZeroMQ (the empty prefix matches everything).
func (s *subscriber) wants(topic []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.topics {
		if bytes.HasPrefix(topic, t) {
			return true
		}
	}
	return false
}

// subscribe adds (on) or removes one subscription, as a ZeroMQ PUB keeps
// one entry per topic; false when the peer asks for more than maxTopics.
func (s *subscriber) subscribe(topic []byte, on bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range s.topics {
		if bytes.Equal(t, topic) {
			if !on {
				s.topics = append(s.topics[:i], s.topics[i+1:]...)
			}
			return true
		}
	}
	if !on {
		return true
	}
	if len(s.topics) == maxTopics {
		return false
	}
	s.topics = append(s.topics, bytes.Clone(topic))
	return true
}

// serveSubscriber runs the handshake on c, and then c's subscriber until
// its connection ends; the caller closes c.
func (p *Publisher) serveSubscriber(c net.Conn, server bool) {
	if _, err := handshake(c, zmq4.Pub, server, handshakeTimeout); err != nil {
		return
	}
	s := &subscriber{conn: c, peer: c.RemoteAddr().String(), q: make(chan []byte, p.opts.HWM),
		ctl: make(chan []byte, 1), gone: make(chan struct{}), flushed: make(chan struct{})}
	p.mu.Lock()
	if p.closed || len(p.peers) >= p.opts.MaxSubscribers {
		if !p.closed {
			p.refused++
		}
		p.mu.Unlock()
		return
	}
	p.nextID++
	s.id = p.nextID
	p.peers[s] = struct{}{}
	p.mu.Unlock()
	p.wg.Add(1)
	go p.writeSubscriber(s)
	p.readSubscriber(s)
	close(s.gone) // ends the writer, if the reader ended first
	c.Close()
	<-s.flushed
	p.mu.Lock()
	delete(p.peers, s)
	p.mu.Unlock()
}

// readSubscriber applies what s sends, until its connection ends: a
// subscription message (one frame, 1 then the topic) or cancellation (0
// then the topic), ZMTP 3.1's SUBSCRIBE and CANCEL commands, and PING,
// which is answered. Anything else is ignored, as libzmq's PUB does.
// Each subscription is reported once applied: from then on what is
// published is queued for s.
func (p *Publisher) readSubscriber(s *subscriber) {
	r := bufio.NewReader(s.conn)
	for {
		frames, cmd, err := readMsg(r, maxSubscription)
		if err != nil {
			return
		}
		var topic []byte
		var on, sub bool
		switch {
		case cmd == "SUBSCRIBE" || cmd == "CANCEL":
			topic, on, sub = frames[0], cmd == "SUBSCRIBE", true
		case cmd == "PING":
			// PING is a 2-byte TTL and a context that PONG echoes.
			if len(frames[0]) >= 2 {
				select {
				case s.ctl <- encodeCmd("PONG", frames[0][2:]):
				default: // one is waiting already
				}
			}
		case cmd == "" && len(frames) == 1 && len(frames[0]) > 0 && frames[0][0] <= 1:
			topic, on, sub = frames[0][1:], frames[0][0] == 1, true
		}
		if !sub {
			continue
		}
		if !s.subscribe(topic, on) {
			return // more topics than a subscriber of ours has any use for
		}
		if on {
			p.notifySubscribed()
		}
	}
}

// writeSubscriber writes s's queue to its connection, each message under
// WriteTimeout, until the queue closes (Close) or a write fails; a write
// that times out disconnects s, since it took nothing for that long (and
// half a message has gone out, so the stream cannot go on).
func (p *Publisher) writeSubscriber(s *subscriber) {
	defer p.wg.Done()
	defer close(s.flushed)
	write := func(m []byte) bool {
		if err := s.conn.SetWriteDeadline(time.Now().Add(p.opts.WriteTimeout)); err != nil {
			return false
		}
		_, err := s.conn.Write(m)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			p.mu.Lock()
			p.cut++
			p.mu.Unlock()
		}
		if err != nil {
			s.conn.Close()
			return false
		}
		return true
	}
	for {
		select {
		case <-s.gone:
			return
		case m := <-s.ctl:
			if !write(m) {
				return
			}
		case m, ok := <-s.q:
			if !ok || !write(m) {
				return
			}
		}
	}
}
