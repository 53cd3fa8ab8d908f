package kvevents

import (
	"bufio"
	"context"
	"encoding/binary"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bigBatch is a batch of about n bytes of msgpack: token ids past 65535
// take 5 bytes each.
func bigBatch(n int) Batch {
	toks := make([]int32, n/5)
	for i := range toks {
		toks[i] = 1<<20 + int32(i)
	}
	return Batch{TS: 1, Events: []Event{{Type: BlockStored, BlockHashes: []Hash{{1}}, TokenIDs: toks, BlockSize: len(toks)}}}
}

// smallRcvbuf dials with a receive buffer of 4 KiB (the kernel's floor is
// about that), set before connecting so that the window it advertises is
// small from the start.
var smallRcvbuf = net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
	var err error
	if e := rc.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
	}); e != nil {
		return e
	}
	return err
}}

// stuckSubscriber is a raw ZMTP peer: it connects to the publisher at
// endpoint with a small receive buffer, completes the handshake as a SUB,
// subscribes to "kv@", and then never reads.
func stuckSubscriber(t *testing.T, ctx context.Context, endpoint string) net.Conn {
	t.Helper()
	c, err := smallRcvbuf.DialContext(ctx, "tcp", endpoint[len("tcp://"):])
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(guard)))
	_, err = zmq4.Open(c, null.Security(), zmq4.Sub, nil, false, nil)
	require.NoError(t, err)
	_, err = c.Write(encodeMsg([]byte("\x01kv@")))
	require.NoError(t, err)
	return c
}

// statsOf returns the stats of the subscriber whose remote address is peer.
func statsOf(t *testing.T, p *Publisher, peer string) (SubscriberStats, bool) {
	t.Helper()
	for _, s := range p.Stats().Subscribers {
		if s.Peer == peer {
			return s, true
		}
	}
	return SubscriberStats{}, false
}

// TestPublisherDropsForAStuckSubscriberAlone: a subscriber that completes
// the handshake, subscribes and never reads (with a small receive buffer)
// fills its kernel buffers and then its queue of HWM messages; from then on
// what is published is dropped for it and counted, while a healthy
// subscriber gets every batch, each published only after it received the
// one before (so its own queue never fills). A new subscriber can still
// join, and Close returns although the stuck peer still holds a write.
func TestPublisherDropsForAStuckSubscriberAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	pub, err := NewPublisher(PublisherOptions{Endpoint: bindAny, Topic: "kv@x@m", HWM: 8, WriteTimeout: guard, Linger: 100 * time.Millisecond})
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			pub.Close()
		}
	}()
	ep := loopback(t, pub.Addr())
	stuck := stuckSubscriber(t, ctx, ep)
	waitSubscribed(t, ctx, pub)
	healthy := newSub(t, ctx)
	require.NoError(t, healthy.Dial(ep))
	msgs := recvAsync(healthy)
	waitSubscribed(t, ctx, pub)

	batch := bigBatch(64 << 10)
	var sent uint64
	for ; sent < 2000; sent++ { // 128 MB at most; the stuck peer's buffers hold a few MB
		require.NoError(t, pub.Publish(batch))
		require.Equal(t, sent, seqOf(t, recvMsg(t, ctx, msgs)), "the healthy subscriber gets every batch, in order")
		if s, _ := statsOf(t, pub, stuck.LocalAddr().String()); s.Dropped > 0 {
			break
		}
	}
	st, ok := statsOf(t, pub, stuck.LocalAddr().String())
	require.True(t, ok, "the stuck subscriber is still connected (its write timeout is long)")
	require.Positive(t, st.Dropped, "after %d batches nothing was dropped for the stuck subscriber", sent)
	assert.Equal(t, 8, st.Queued, "its queue is full")
	t.Logf("the stuck subscriber's drops began at batch %d", sent)
	h, ok := statsOf(t, pub, healthyAddr(t, pub, stuck))
	require.True(t, ok)
	assert.Zero(t, h.Dropped, "nothing is dropped for a subscriber that reads")

	// Another batch is dropped for the stuck one too, and counted.
	require.NoError(t, pub.Publish(batch))
	sent++
	require.Equal(t, sent, seqOf(t, recvMsg(t, ctx, msgs)))
	again, _ := statsOf(t, pub, stuck.LocalAddr().String())
	assert.Equal(t, st.Dropped+1, again.Dropped)
	assert.Equal(t, again.Dropped, pub.Stats().Dropped, "the total counts every subscriber's drops")

	late := newSub(t, ctx)
	require.NoError(t, late.Dial(ep))
	lateMsgs := recvAsync(late)
	waitSubscribed(t, ctx, pub)
	require.NoError(t, pub.Publish(Batch{TS: 2}))
	sent++
	assert.Equal(t, sent, seqOf(t, recvMsg(t, ctx, lateMsgs)), "a new subscriber joins beside the stuck one")
	assert.Equal(t, sent, seqOf(t, recvMsg(t, ctx, msgs)))

	done := make(chan error, 1)
	go func() { done <- pub.Close() }()
	select {
	case err := <-done:
		closed = true
		require.NoError(t, err)
	case <-time.After(guard / 3):
		t.Fatal("Close waits on the stuck subscriber")
	}
}

// healthyAddr returns the remote address of the one subscriber that is
// not stuck.
func healthyAddr(t *testing.T, p *Publisher, stuck net.Conn) string {
	t.Helper()
	for _, s := range p.Stats().Subscribers {
		if s.Peer != stuck.LocalAddr().String() {
			return s.Peer
		}
	}
	t.Fatal("no other subscriber")
	return ""
}

// TestPublisherCutsASubscriberThatTakesNothing: with a short write
// timeout, a stuck subscriber is disconnected once a write to it has
// waited that long; it leaves the stats, and the cut is counted.
func TestPublisherCutsASubscriberThatTakesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	pub, err := NewPublisher(PublisherOptions{Endpoint: bindAny, Topic: "kv@x@m", HWM: 4, WriteTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	defer pub.Close()
	stuck := stuckSubscriber(t, ctx, loopback(t, pub.Addr()))
	waitSubscribed(t, ctx, pub)
	batch := bigBatch(64 << 10)
	for range 200 { // 13 MB: more than the stuck peer's buffers hold
		require.NoError(t, pub.Publish(batch))
	}
	for pub.Stats().Cut == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the stuck subscriber was never disconnected")
		case <-time.After(10 * time.Millisecond):
		}
	}
	for {
		if _, ok := statsOf(t, pub, stuck.LocalAddr().String()); !ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the disconnected subscriber stays in the stats")
		case <-time.After(10 * time.Millisecond):
		}
	}
	assert.Equal(t, uint64(1), pub.Stats().Cut)
}

// TestReplayBufferBoundedInBytes churns subscribers as a flapping indexer
// would: each connects, subscribes, gets a snapshot-sized batch (the
// server publishes the whole cache on every subscription) and leaves. The
// replay buffer keeps many steps but no more than its byte bound, the
// newest batches; and every subscriber is gone from the stats after.
func TestReplayBufferBoundedInBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	const bound = 256 << 10
	pub, err := NewPublisher(PublisherOptions{Endpoint: bindAny, Topic: "kv@x@m", ReplayEndpoint: bindAny, BufferSteps: 10000, BufferBytes: bound})
	require.NoError(t, err)
	defer pub.Close()
	ep := loopback(t, pub.Addr())
	snapshot := bigBatch(16 << 10)
	const cycles = 100
	for i := range cycles {
		sub := zmq4.NewSub(ctx)
		require.NoError(t, sub.SetOption(zmq4.OptionSubscribe, "kv@"))
		require.NoError(t, sub.Dial(ep))
		waitSubscribed(t, ctx, pub)
		require.NoError(t, pub.Publish(snapshot))
		m, err := sub.Recv()
		require.NoError(t, err)
		require.Equal(t, uint64(i), seqOf(t, m))
		require.NoError(t, sub.Close())
	}
	st := pub.Stats()
	assert.LessOrEqual(t, st.ReplayBytes, bound)
	assert.Positive(t, st.ReplayBatches)
	assert.Less(t, st.ReplayBatches, cycles, "the byte bound, not the steps, decides")
	got, err := Replay(ctx, loopback(t, pub.ReplayAddr()), 0)
	require.NoError(t, err)
	require.Len(t, got, st.ReplayBatches)
	for i, r := range got {
		assert.Equal(t, uint64(cycles-len(got)+i), r.Seq, "the newest batches are kept")
	}
	for len(pub.Stats().Subscribers) > 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d subscribers that left are still held", len(pub.Stats().Subscribers))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestReplayBufferEvictsByStepsAndBytes(t *testing.T) {
	r := replayBuffer{maxSteps: 3, maxBytes: 10}
	for i := range 5 {
		r.add(uint64(i), []byte{byte(i)})
	}
	assert.Equal(t, []replayed{{2, []byte{2}}, {3, []byte{3}}, {4, []byte{4}}}, r.from(0, 0))
	r.add(5, make([]byte, 9)) // 3, 4 and 5 weigh 11 bytes: 3 goes
	assert.Equal(t, 10, r.bytes)
	assert.Equal(t, []uint64{4, 5}, seqs(r.from(0, 0)))
	r.add(6, make([]byte, 11)) // too big to keep at all
	assert.Equal(t, 0, r.len())
	assert.Equal(t, 0, r.bytes)
	for i := range 1000 {
		r.add(uint64(7+i), []byte{1})
	}
	assert.LessOrEqual(t, cap(r.items), 64, "the buffer does not grow with what passed through it")
	assert.Equal(t, []uint64{1005, 1006}, seqs(r.from(1005, 0)))
	assert.Equal(t, []uint64{1004}, seqs(r.from(0, 1)))
}

func seqs(rs []replayed) []uint64 {
	var out []uint64
	for _, r := range rs {
		out = append(out, r.seq)
	}
	return out
}

// TestReplayServesAREQClient: a REQ socket takes one reply per request, so
// the replay socket answers it one batch at a time; asking again from the
// next sequence number walks the buffer to the end marker.
func TestReplayServesAREQClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	pub, err := NewPublisher(PublisherOptions{Endpoint: bindAny, Topic: "kv@h:1@m", ReplayEndpoint: bindAny, BufferSteps: 3})
	require.NoError(t, err)
	defer pub.Close()
	for i := range 5 {
		require.NoError(t, pub.Publish(Batch{TS: float64(i)}))
	}
	req := zmq4.NewReq(ctx)
	defer req.Close()
	require.NoError(t, req.Dial(loopback(t, pub.ReplayAddr())))
	ask := func(start uint64) zmq4.Msg {
		require.NoError(t, req.Send(zmq4.NewMsg(binary.BigEndian.AppendUint64(nil, start))))
		m, err := req.Recv()
		require.NoError(t, err)
		require.Len(t, m.Frames, 3, "[topic, seq, payload]")
		return m
	}
	// One reply, not vLLM's whole answer: what followed it would be taken
	// for the reply to the next request (zmq4's REQ reads it; libzmq's
	// drops it).
	assert.Equal(t, uint64(4), binary.BigEndian.Uint64(ask(4).Frames[1]))
	var got []uint64
	start := uint64(1)
	for range 10 {
		m := ask(start)
		if string(m.Frames[1]) == string(ReplayEnd) {
			assert.Empty(t, m.Frames[0])
			assert.Empty(t, m.Frames[2])
			break
		}
		assert.Equal(t, "kv@h:1@m", string(m.Frames[0]))
		seq := binary.BigEndian.Uint64(m.Frames[1])
		back, err := DecodeVLLM(m.Frames[2])
		require.NoError(t, err)
		assert.Equal(t, float64(seq), back.TS)
		got = append(got, seq)
		start = seq + 1
	}
	assert.Equal(t, []uint64{2, 3, 4}, got, "from 1: what the buffer of 3 still holds, then the end")
}

// TestConnectingPublisherHoldsOneConnection: a connecting publisher dials
// again only once its connection has ended. The subscriber here is a raw
// listener that counts connections: after many dial intervals it still has
// the first one, and every batch arrives on it once, in order; when it
// drops that connection the publisher dials again.
func TestConnectingPublisherHoldsOneConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	conns := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(conns)
				return
			}
			conns <- c
		}
	}()
	const retry = 5 * time.Millisecond
	pub, err := NewPublisher(PublisherOptions{Endpoint: "tcp://" + ln.Addr().String(), Topic: "kv@x@m", DialRetry: retry})
	require.NoError(t, err)
	defer pub.Close()
	var c net.Conn
	select {
	case c = <-conns:
	case <-ctx.Done():
		t.Fatal("the publisher never dialled")
	}
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(guard)))
	_, err = zmq4.Open(c, null.Security(), zmq4.Sub, nil, true, nil)
	require.NoError(t, err)
	_, err = c.Write(encodeMsg([]byte("\x01kv@")))
	require.NoError(t, err)
	waitSubscribed(t, ctx, pub)
	r := bufio.NewReader(c)
	for i := range 3 {
		require.NoError(t, pub.Publish(Batch{TS: float64(i)}))
		frames, _, err := readMsg(r, 1<<20)
		require.NoError(t, err)
		require.Len(t, frames, 3)
		assert.Equal(t, uint64(i), binary.BigEndian.Uint64(frames[1]))
	}
	time.Sleep(100 * retry) // a publisher that redials while connected has done so by now
	select {
	case extra := <-conns:
		extra.Close()
		t.Fatal("a second connection while the first is open: every batch would arrive twice")
	default:
	}
	require.NoError(t, c.Close())
	select {
	case again := <-conns:
		again.Close()
	case <-ctx.Done():
		t.Fatal("the publisher did not dial again once its connection ended")
	}
}

// TestPublisherRefusesOverMaxSubscribers: a connection past
// MaxSubscribers is closed and counted, and the one in place keeps its
// subscription.
func TestPublisherRefusesOverMaxSubscribers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	pub, err := NewPublisher(PublisherOptions{Endpoint: bindAny, Topic: "kv@x@m", MaxSubscribers: 1})
	require.NoError(t, err)
	defer pub.Close()
	ep := loopback(t, pub.Addr())
	first := newSub(t, ctx)
	require.NoError(t, first.Dial(ep))
	msgs := recvAsync(first)
	waitSubscribed(t, ctx, pub)
	second, err := net.Dial("tcp", ep[len("tcp://"):])
	require.NoError(t, err)
	defer second.Close()
	require.NoError(t, second.SetDeadline(time.Now().Add(guard)))
	_, err = zmq4.Open(second, null.Security(), zmq4.Sub, nil, false, nil)
	require.NoError(t, err, "the handshake completes")
	var one [1]byte
	_, err = second.Read(one[:])
	assert.Error(t, err, "the second connection is closed")
	assert.Equal(t, uint64(1), pub.Stats().Refused)
	require.NoError(t, pub.Publish(Batch{TS: 1}))
	assert.Equal(t, uint64(0), seqOf(t, recvMsg(t, ctx, msgs)))
}

func TestReadMsgRefusesAnOversizedFrame(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go b.Write(appendFrame(nil, 0, make([]byte, 300))[:9]) // announces 300 bytes
	_, _, err := readMsg(a, 256)
	assert.ErrorContains(t, err, "exceeds 256 bytes")
}

// TestPublisherBindsIPC: an ipc:// endpoint binds a Unix socket that a
// zmq4 SUB reaches.
func TestPublisherBindsIPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	ep := "ipc://" + t.TempDir() + "/kv.sock"
	pub, err := NewPublisher(PublisherOptions{Endpoint: ep, Topic: "kv@x@m"})
	require.NoError(t, err)
	defer pub.Close()
	sub := newSub(t, ctx)
	require.NoError(t, sub.Dial(ep))
	msgs := recvAsync(sub)
	waitSubscribed(t, ctx, pub)
	require.NoError(t, pub.Publish(Batch{TS: 1}))
	assert.Equal(t, uint64(0), seqOf(t, recvMsg(t, ctx, msgs)))
	_, err = NewPublisher(PublisherOptions{Endpoint: "inproc://kv"})
	assert.ErrorContains(t, err, "want tcp://host:port, tcp://*:port or ipc://path")
}
