package kvevents

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// guard bounds a test that waits on the network; the waits themselves are
// on events, never on the clock.
const guard = 30 * time.Second

func newSub(t *testing.T, ctx context.Context) zmq4.Socket {
	t.Helper()
	sub := zmq4.NewSub(ctx)
	t.Cleanup(func() { sub.Close() })
	require.NoError(t, sub.SetOption(zmq4.OptionSubscribe, "kv@"))
	return sub
}

// recvAsync delivers sub's messages on a channel until sub closes.
func recvAsync(sub zmq4.Socket) <-chan zmq4.Msg {
	ch := make(chan zmq4.Msg, 64)
	go func() {
		defer close(ch)
		for {
			m, err := sub.Recv()
			if err != nil {
				return
			}
			ch <- m
		}
	}()
	return ch
}

// bindAny binds on every interface, as vLLM's rule wants a wildcard to
// bind; loopback reaches it.
const bindAny = "tcp://*:0"

// loopback is the tcp:// endpoint of a bound publisher's port on 127.0.0.1.
func loopback(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	return "tcp://127.0.0.1:" + port
}

func waitSubscribed(t *testing.T, ctx context.Context, p *Publisher) {
	t.Helper()
	select {
	case _, ok := <-p.Subscriptions():
		require.True(t, ok, "the publisher closed")
	case <-ctx.Done():
		t.Fatal("no subscription reached the publisher")
	}
}

func recvMsg(t *testing.T, ctx context.Context, ch <-chan zmq4.Msg) zmq4.Msg {
	t.Helper()
	select {
	case m, ok := <-ch:
		require.True(t, ok, "the subscriber closed")
		return m
	case <-ctx.Done():
		t.Fatal("no message arrived")
		return zmq4.Msg{}
	}
}

func seqOf(t *testing.T, m zmq4.Msg) uint64 {
	t.Helper()
	require.Len(t, m.Frames, 3, "topic, sequence, payload")
	require.Len(t, m.Frames[1], 8)
	return binary.BigEndian.Uint64(m.Frames[1])
}

// TestPublisherFrames connects a Publisher to a SUB socket bound on
// loopback (the way llm-d's indexer can listen and vLLM replicas connect),
// waits for the subscription to reach it, and checks the three frames of
// the one batch it then publishes: nothing is published into the void.
func TestPublisherFrames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	sub := newSub(t, ctx)
	require.NoError(t, sub.Listen("tcp://127.0.0.1:0"))
	msgs := recvAsync(sub)

	pub, err := NewPublisher(PublisherOptions{Endpoint: "tcp://" + sub.Addr().String(), Topic: "kv@replica-0@model"})
	require.NoError(t, err)
	defer pub.Close()
	assert.Empty(t, pub.Addr(), "a connecting publisher listens on nothing")

	_, batch := fixtureBatch(t)
	waitSubscribed(t, ctx, pub)
	require.NoError(t, pub.Publish(batch))
	msg := recvMsg(t, ctx, msgs)
	assert.Equal(t, "kv@replica-0@model", string(msg.Frames[0]))
	assert.Equal(t, uint64(0), seqOf(t, msg), "the first batch published is the first received")
	back, err := DecodeVLLM(msg.Frames[2])
	require.NoError(t, err)
	assert.Equal(t, batch, back)

	require.NoError(t, pub.Publish(batch))
	assert.Equal(t, uint64(1), seqOf(t, recvMsg(t, ctx, msgs)), "the next message carries the next number")
}

// TestPublisherReportsEverySubscriber binds the publisher and connects
// subscribers one after another, as llm-d's indexer connects to each
// replica it discovers (and again after it restarts): each one's
// subscription is reported, and the batch published after the report is
// the first thing it receives.
func TestPublisherReportsEverySubscriber(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	pub, err := NewPublisher(PublisherOptions{Endpoint: bindAny, Topic: "kv@x@m"})
	require.NoError(t, err)
	defer pub.Close()
	require.NotEmpty(t, pub.Addr())
	_, batch := fixtureBatch(t)

	var seq uint64
	for i := range 3 {
		sub := newSub(t, ctx)
		require.NoError(t, sub.Dial(loopback(t, pub.Addr())))
		msgs := recvAsync(sub)
		waitSubscribed(t, ctx, pub)
		require.NoError(t, pub.Publish(batch))
		assert.Equal(t, seq, seqOf(t, recvMsg(t, ctx, msgs)), "subscriber %d gets the batch published after its subscription", i)
		seq++
		if i == 1 {
			sub.Close() // the third reconnects in its place
		}
	}
}

// TestPublisherRedialsARestartedSubscriber: a connecting publisher whose
// subscriber goes away dials again, and the new subscriber's subscription
// is reported like the first.
func TestPublisherRedialsARestartedSubscriber(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	sub := newSub(t, ctx)
	require.NoError(t, sub.Listen("tcp://127.0.0.1:0"))
	addr := sub.Addr().String()
	msgs := recvAsync(sub)
	pub, err := NewPublisher(PublisherOptions{Endpoint: "tcp://" + addr, Topic: "kv@x@m"})
	require.NoError(t, err)
	defer pub.Close()
	_, batch := fixtureBatch(t)
	waitSubscribed(t, ctx, pub)
	require.NoError(t, pub.Publish(batch))
	assert.Equal(t, uint64(0), seqOf(t, recvMsg(t, ctx, msgs)))

	require.NoError(t, sub.Close())
	again := newSub(t, ctx)
	for again.Listen("tcp://"+addr) != nil { // the port frees once the old listener is gone
		select {
		case <-ctx.Done():
			t.Fatal("could not listen again on " + addr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	msgs = recvAsync(again)
	waitSubscribed(t, ctx, pub)
	require.NoError(t, pub.Publish(batch))
	assert.Equal(t, uint64(1), seqOf(t, recvMsg(t, ctx, msgs)), "the restarted subscriber gets what follows its subscription")
}

// TestPublisherIgnoresAPeerThatNeverSubscribes: a bare TCP connection (a
// health check, a port scan) is not a subscriber.
func TestPublisherIgnoresAPeerThatNeverSubscribes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	pub, err := NewPublisher(PublisherOptions{Endpoint: bindAny, Topic: "kv@x@m"})
	require.NoError(t, err)
	defer pub.Close()
	c, err := net.Dial("tcp", loopback(t, pub.Addr())[len("tcp://"):])
	require.NoError(t, err)
	require.NoError(t, c.Close())
	// A real subscriber after it is reported once, for itself.
	sub := newSub(t, ctx)
	require.NoError(t, sub.Dial(loopback(t, pub.Addr())))
	waitSubscribed(t, ctx, pub)
	select {
	case <-pub.Subscriptions():
		t.Fatal("one subscriber, two reports")
	default:
	}
}

func TestPublisherRefusesUnknownEndpoint(t *testing.T) {
	_, err := NewPublisher(PublisherOptions{Endpoint: "udp://127.0.0.1:1"})
	assert.ErrorContains(t, err, "want tcp://")
	_, err = NewPublisher(PublisherOptions{Endpoint: "tcp://127.0.0.1:0", BufferSteps: -1})
	assert.ErrorContains(t, err, "buffer steps")
}

func TestPublishAfterCloseFails(t *testing.T) {
	pub, err := NewPublisher(PublisherOptions{Endpoint: bindAny})
	require.NoError(t, err)
	require.NoError(t, pub.Close())
	assert.ErrorIs(t, pub.Publish(Batch{}), ErrPublisherClosed)
	_, open := <-pub.Subscriptions()
	assert.False(t, open, "Close closes Subscriptions")
	require.NoError(t, pub.Close(), "closing twice is harmless")
}
