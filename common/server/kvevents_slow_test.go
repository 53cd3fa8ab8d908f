package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvevents"
)

const slowGuard = 30 * time.Second

// smallBuffers shrinks a socket's kernel buffer: SO_RCVBUF on the client,
// set before it connects; SO_SNDBUF on each connection the server accepts.
func smallBuffer(opt int) func(syscall.RawConn) error {
	return func(rc syscall.RawConn) error {
		var err error
		if e := rc.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 4096) }); e != nil {
			return e
		}
		return err
	}
}

type smallSendListener struct{ net.Listener }

func (l smallSendListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			_ = smallBuffer(syscall.SO_SNDBUF)(rc)
		}
	}
	return c, nil
}

// startSlowEventServer serves KV events with opts (a short WriteTimeout)
// on a listener whose connections have a small send buffer.
func startSlowEventServer(t *testing.T, opts Options) (string, *KVEvents, func()) {
	t.Helper()
	tm := loadTestModel(t)
	cfg := engineConfig(true)
	cfg.NumBlocks = 2048
	e, err := engine.New(tm.m, cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	ev := NewKVEvents(e.Pool().Observe(kvevents.DefaultHashSeed))
	es := engine.NewServer(e)
	opts.Tokenizer, opts.PrefixCaching, opts.KVEvents = tm.tok, true, ev
	h := New(es, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done, evDone := make(chan struct{}), make(chan struct{})
	go func() { es.Run(ctx); close(done) }()
	go func() { ev.Run(ctx); close(evDone) }()
	hs := httptest.NewUnstartedServer(h)
	hs.Listener = smallSendListener{hs.Listener}
	hs.Start()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ev.Close()
		hs.Close()
		cancel()
		<-done
		<-evDone
	}
	t.Cleanup(stop)
	return hs.URL, ev, stop
}

// kvMetric returns the value of the /metrics line that starts with series
// (name and labels), or -1 when there is none.
func kvMetric(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := testClient.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return -1
}

// waitMetric polls /metrics until series has value want.
func waitMetric(t *testing.T, ctx context.Context, url, series string, want float64) {
	t.Helper()
	for kvMetric(t, url, series) != want {
		select {
		case <-ctx.Done():
			t.Fatalf("%s never reached %v (last %v)", series, want, kvMetric(t, url, series))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestKVEventStreamEndsForAClientThatStopsReading: a client of GET
// /v1/kv_events that never reads, with small kernel buffers both sides,
// cannot take the whole-cache batch its stream starts with; the write
// passes Options.WriteTimeout, the stream ends and is counted, and the
// server shuts down without waiting for the client.
func TestKVEventStreamEndsForAClientThatStopsReading(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), slowGuard)
	defer cancel()
	url, _, stop := startSlowEventServer(t, Options{WriteTimeout: 200 * time.Millisecond})
	for p := range 12 { // 12 chains of 60 blocks: a first batch of about 60 KB
		prompt := make([]int32, 240)
		for i := range prompt {
			prompt[i] = int32(3 + (p*31+i*7)%500)
		}
		status, body := post(t, url+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 1, "temperature": 0})
		require.Equal(t, http.StatusOK, status, string(body))
	}
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error { return smallBuffer(syscall.SO_RCVBUF)(rc) }}
	c, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(url, "http://"))
	require.NoError(t, err)
	defer c.Close()
	_, err = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: kvlab\r\n\r\n", kvevents.StreamPath)
	require.NoError(t, err)

	waitMetric(t, ctx, url, "kvlab:kv_events_http_streams_cut_total", 1)
	assert.Equal(t, 0.0, kvMetric(t, url, "kvlab:kv_events_http_streams"), "the stream is gone")
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("the shutdown waits on the client that does not read")
	}
}

// TestKVEventMetricsCountAStuckSubscriber: /metrics shows, per ZeroMQ
// subscriber, what was dropped for it: a subscriber that never reads has
// its own series, whose count rises, and the total includes it.
func TestKVEventMetricsCountAStuckSubscriber(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), slowGuard)
	defer cancel()
	url, ev, _ := startSlowEventServer(t, Options{})
	pub, err := kvevents.NewPublisher(kvevents.PublisherOptions{Endpoint: "tcp://*:0", Topic: "kv@t:1@m", HWM: 4, Linger: 100 * time.Millisecond})
	require.NoError(t, err)
	defer pub.Close()
	ev.AddPublisher(pub, t.Logf)
	_, port, err := net.SplitHostPort(pub.Addr())
	require.NoError(t, err)
	ep := "127.0.0.1:" + port

	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error { return smallBuffer(syscall.SO_RCVBUF)(rc) }}
	stuck, err := d.DialContext(ctx, "tcp", ep)
	require.NoError(t, err)
	defer stuck.Close()
	require.NoError(t, stuck.SetDeadline(time.Now().Add(slowGuard)))
	_, err = zmq4.Open(stuck, null.Security(), zmq4.Sub, nil, false, nil)
	require.NoError(t, err)
	_, err = stuck.Write([]byte{0, 4, 1, 'k', 'v', '@'}) // subscribe to "kv@"
	require.NoError(t, err)
	healthy := zmq4.NewSub(ctx)
	defer healthy.Close()
	require.NoError(t, healthy.SetOption(zmq4.OptionSubscribe, "kv@"))
	require.NoError(t, healthy.Dial("tcp://"+ep))
	go func() {
		for {
			if _, err := healthy.Recv(); err != nil {
				return
			}
		}
	}()
	waitMetric(t, ctx, url, "kvlab:kv_events_zmq_subscribers", 2)

	toks := make([]int32, 64<<10/5)
	for i := range toks {
		toks[i] = 1<<20 + int32(i)
	}
	big := kvevents.Batch{TS: 1, Events: []kvevents.Event{{Type: kvevents.BlockStored, BlockHashes: []kvevents.Hash{{1}}, TokenIDs: toks, BlockSize: len(toks)}}}
	var stuckDrops float64
	for range 2000 { // 128 MB at most; the stuck peer's buffers hold a few MB
		require.NoError(t, pub.Publish(big))
		for _, s := range pub.Stats().Subscribers {
			if s.Peer == stuck.LocalAddr().String() && s.Dropped > 0 {
				stuckDrops = 1
			}
		}
		if stuckDrops > 0 {
			break
		}
	}
	require.Positive(t, stuckDrops, "nothing was dropped for the stuck subscriber")
	var found bool
	for _, s := range pub.Stats().Subscribers {
		id := strconv.FormatUint(s.ID, 10)
		v := kvMetric(t, url, fmt.Sprintf(`kvlab:kv_events_zmq_subscriber_dropped_total{peer=%q,subscriber=%q}`, s.Peer, id))
		if s.Peer == stuck.LocalAddr().String() {
			found = true
			assert.Positive(t, v, "the stuck subscriber's series")
			assert.GreaterOrEqual(t, kvMetric(t, url, "kvlab:kv_events_zmq_dropped_total"), v)
		}
	}
	assert.True(t, found, "the stuck subscriber has a series")
}
