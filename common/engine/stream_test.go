package engine

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
)

func TestServerStreamsEachRequestInOrder(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	reqs := []Request{
		{ID: 1, Prompt: []int32{1, 2, 3}, MaxTokens: 5, IgnoreEOS: true},
		{ID: 2, Prompt: []int32{4, 5, 6, 7, 8, 9}, MaxTokens: 3, IgnoreEOS: true},
	}
	want := solo(t, m, testConfig(), reqs)

	srv := NewServer(newTestEngine(t, m, testConfig()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	_, err := srv.Submit(Request{ID: 3, MaxTokens: 1})
	require.ErrorContains(t, err, "empty prompt")

	var wg sync.WaitGroup
	for _, r := range reqs {
		ch, err := srv.Submit(r)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var toks []int32
			for {
				o, ok, err := ch.Recv(context.Background())
				require.NoError(t, err)
				if !ok { // after the last event
					break
				}
				assert.Equal(t, len(toks), o.Index)
				toks = append(toks, o.Token)
			}
			assert.Equal(t, want[r.ID].Tokens, toks, "request %d", r.ID)
		}()
	}
	wg.Wait()
}

// startServer runs srv's loop until the test ends.
func startServer(t *testing.T, srv *Server) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestServerNeverWaitsForAReader submits a request whose stream nobody
// reads: the loop must go on serving others, and once the unread events
// pass MaxUnread it cancels the request and gives its blocks back. The
// proof is in engine steps and events, not in time: the other requests
// finish, the ignored one is cut at MaxUnread events, and the pool is
// empty afterwards.
func TestServerNeverWaitsForAReader(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	// The requests that are read ask for fewer tokens than the budget, so
	// however far their reader falls behind on a busy machine they are never
	// cut; the ignored one asks for 80 events.
	const budget = 32
	srv := NewServerWith(newTestEngine(t, m, testConfig()), Limits{MaxUnread: budget})
	startServer(t, srv)

	ignored, err := srv.Submit(Request{ID: 1, Prompt: []int32{1, 2, 3}, MaxTokens: 40, N: 2, IgnoreEOS: true})
	require.NoError(t, err)
	for id := 2; id <= 4; id++ {
		st, err := srv.Submit(Request{ID: id, Prompt: []int32{int32(id), 5, 6}, MaxTokens: 30, IgnoreEOS: true})
		require.NoError(t, err)
		n := 0
		for {
			_, ok, err := st.Recv(context.Background())
			require.NoError(t, err)
			if !ok {
				break
			}
			n++
		}
		assert.Equal(t, 30, n, "request %d", id)
	}

	// The ignored stream holds what was delivered before the cut, then a
	// "cancelled" event for each sample; nothing is lost or duplicated.
	var tokens, cancelled int
	for {
		o, ok, err := ignored.Recv(context.Background())
		require.NoError(t, err)
		if !ok {
			break
		}
		if o.Reason == "cancelled" {
			cancelled++
		} else {
			tokens++
		}
	}
	assert.True(t, ignored.TooSlow())
	assert.Equal(t, 2, cancelled, "one last event per sample")
	// The cut comes in the step whose events pass the budget; that step
	// still delivers one event per sample.
	assert.LessOrEqual(t, tokens, budget+2, "the loop cut the request once its reader was %d events behind", budget)
	assert.Less(t, tokens, 80, "the request was cut, not finished")
	snap := srv.Snapshot()
	assert.Equal(t, 1, snap.TooSlow)
	assert.Equal(t, snap.TotalBlocks, snap.FreeBlocks+snap.CacheBlocks, "every block is back")
}

// TestServerQueueBoundIsHard submits many requests at once against a small
// MaxWaiting: however the submissions interleave with the loop, no more
// than MaxWaiting sequences ever wait, and each refusal is ErrQueueFull.
func TestServerQueueBoundIsHard(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	c := testConfig()
	c.MaxRunning = 1
	srv := NewServerWith(newTestEngine(t, m, c), Limits{MaxWaiting: 3})
	startServer(t, srv)

	var mu sync.Mutex
	var accepted, refused, worst int
	var wg sync.WaitGroup
	for id := 1; id <= 40; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := srv.Submit(Request{ID: id, Prompt: []int32{1, 2, 3}, MaxTokens: 3, IgnoreEOS: true})
			s := srv.Snapshot()
			mu.Lock()
			worst = max(worst, s.Waiting+s.Inbox)
			if errors.Is(err, ErrQueueFull) {
				refused++
			} else {
				assert.NoError(t, err)
				accepted++
			}
			mu.Unlock()
			for err == nil {
				var ok bool
				if _, ok, err = st.Recv(context.Background()); !ok {
					break
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 40, accepted+refused)
	assert.Positive(t, refused, "40 at once against a queue of 3")
	assert.LessOrEqual(t, worst, 3, "waiting never exceeds the bound")
}
