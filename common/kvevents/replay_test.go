package kvevents

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReplayAnswersFromTheBuffer publishes five batches with a buffer of
// three, and asks the replay socket for them as llm-d's indexer does: the
// answer is every buffered batch from the start asked for, with the topic,
// the sequence number and the very payload published, then the end marker.
func TestReplayAnswersFromTheBuffer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	pub, err := NewPublisher(PublisherOptions{Endpoint: bindAny, Topic: "kv@h:1@m", ReplayEndpoint: bindAny, BufferSteps: 3})
	require.NoError(t, err)
	defer pub.Close()
	replay := loopback(t, pub.ReplayAddr())
	_, batch := fixtureBatch(t)
	var payloads [][]byte
	for i := range 5 {
		b := batch
		b.TS += float64(i)
		require.NoError(t, pub.Publish(b))
		p, err := EncodeVLLM(b, Encoding{})
		require.NoError(t, err)
		payloads = append(payloads, p)
	}
	for _, c := range []struct {
		start uint64
		want  []uint64
	}{
		{0, []uint64{2, 3, 4}}, // 0 and 1 left the buffer
		{3, []uint64{3, 4}},
		{4, []uint64{4}},
		{5, nil},
		{1 << 40, nil},
	} {
		got, err := Replay(ctx, replay, c.start)
		require.NoError(t, err, "from %d", c.start)
		var seqs []uint64
		for _, r := range got {
			seqs = append(seqs, r.Seq)
			assert.Equal(t, "kv@h:1@m", r.Topic)
			assert.Equal(t, payloads[r.Seq], r.Payload, "seq %d is the payload published", r.Seq)
		}
		assert.Equal(t, c.want, seqs, "from %d", c.start)
	}
}

// TestReplayFrames checks vLLM's frames exactly with a raw DEALER: a
// request of another shape is ignored, and the answer to a good one is
// ["", topic, seq, payload] per batch, then ["", "", -1, ""].
func TestReplayFrames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	pub, err := NewPublisher(PublisherOptions{Endpoint: bindAny, Topic: "kv@h:1@m", ReplayEndpoint: bindAny, BufferSteps: 10})
	require.NoError(t, err)
	defer pub.Close()
	_, batch := fixtureBatch(t)
	require.NoError(t, pub.Publish(batch))

	d := zmq4.NewDealer(ctx)
	defer d.Close()
	require.NoError(t, d.Dial(loopback(t, pub.ReplayAddr())))
	require.NoError(t, d.SendMulti(zmq4.NewMsgFrom(nil, []byte("too"), []byte("many"))))
	require.NoError(t, d.SendMulti(zmq4.NewMsgFrom(nil, binary.BigEndian.AppendUint64(nil, 0))))
	m, err := d.Recv()
	require.NoError(t, err)
	require.Len(t, m.Frames, 4)
	assert.Empty(t, m.Frames[0], "the delimiter")
	assert.Equal(t, "kv@h:1@m", string(m.Frames[1]))
	assert.Equal(t, uint64(0), binary.BigEndian.Uint64(m.Frames[2]))
	back, err := DecodeVLLM(m.Frames[3])
	require.NoError(t, err)
	assert.Equal(t, batch, back)
	end, err := d.Recv()
	require.NoError(t, err)
	assert.Equal(t, [][]byte{{}, {}, ReplayEnd, {}}, normalize(end.Frames), "the end marker")
}

func normalize(fs [][]byte) [][]byte {
	out := make([][]byte, len(fs))
	for i, f := range fs {
		out[i] = append([]byte{}, f...)
	}
	return out
}

// TestReplayWithoutABuffer: buffer steps 0 keeps nothing, as vLLM's
// deque(maxlen=0); the answer is the end marker alone.
func TestReplayWithoutABuffer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	pub, err := NewPublisher(PublisherOptions{Endpoint: bindAny, ReplayEndpoint: bindAny})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.Publish(Batch{TS: 1}))
	got, err := Replay(ctx, loopback(t, pub.ReplayAddr()), 0)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestStartSeq(t *testing.T) {
	assert.Equal(t, uint64(0), startSeq(nil))
	assert.Equal(t, uint64(0x0102), startSeq([]byte{1, 2}))
	assert.Equal(t, uint64(7), startSeq([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 7}))
	assert.Equal(t, ^uint64(0), startSeq([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0}))
}

// TestPublisherWithLibzmqPeers runs scripts/kv_events_libzmq.py, a libzmq
// subscriber (python3-zmq, what vLLM's subscriber example uses): its
// subscription is noticed like a zmq4 one, the batch published then is
// the first it receives, and it reads the replay answer frame for frame,
// through a DEALER and through a REQ socket.
// Skipped where /usr/bin/python3 has no zmq module.
func TestPublisherWithLibzmqPeers(t *testing.T) {
	if exec.Command("/usr/bin/python3", "-c", "import zmq").Run() != nil {
		t.Skip("no python3-zmq: apt-get install python3-zmq")
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	pub, err := NewPublisher(PublisherOptions{Endpoint: bindAny, Topic: "kv@h:1@m", ReplayEndpoint: bindAny, BufferSteps: 10})
	require.NoError(t, err)
	defer pub.Close()
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", "../../scripts/kv_events_libzmq.py", loopback(t, pub.Addr()), loopback(t, pub.ReplayAddr()))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(out)
	next := func() [][]byte {
		require.True(t, lines.Scan(), "the script stopped: %s", stderr.String())
		var l struct {
			Ready  bool     `json:"ready"`
			Frames []string `json:"frames"`
		}
		require.NoError(t, json.Unmarshal(lines.Bytes(), &l))
		var fs [][]byte
		for _, f := range l.Frames {
			b, err := hex.DecodeString(f)
			require.NoError(t, err)
			fs = append(fs, b)
		}
		return fs
	}
	require.Empty(t, next(), "ready")
	_, batch := fixtureBatch(t)
	waitSubscribed(t, ctx, pub)
	require.NoError(t, pub.Publish(batch))
	live := next()
	require.Len(t, live, 3)
	assert.Equal(t, "kv@h:1@m", string(live[0]))
	assert.Equal(t, uint64(0), binary.BigEndian.Uint64(live[1]))
	want, err := EncodeVLLM(batch, Encoding{})
	require.NoError(t, err)
	assert.Equal(t, want, live[2])
	replayed := next()
	assert.Equal(t, [][]byte{{}, []byte("kv@h:1@m"), live[1], want}, normalize(replayed))
	assert.Equal(t, [][]byte{{}, {}, ReplayEnd, {}}, normalize(next()))
	// A REQ socket: one batch per request, then the end marker.
	assert.Equal(t, [][]byte{[]byte("kv@h:1@m"), live[1], want}, normalize(next()))
	assert.Equal(t, [][]byte{{}, ReplayEnd, {}}, normalize(next()))
	require.NoError(t, cmd.Wait(), stderr.String())
}
