package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kvlab/common/model"
)

// hangBound is how long a test waits for an answer that must come at once:
// it only tells a hang from a busy machine.
const hangBound = 10 * time.Second

// waitPending waits, a bounded number of times, until the loop's inbox holds
// in requests and calls calls submitted by other goroutines.
func waitPending(t *testing.T, s *Server, in, calls int) {
	t.Helper()
	deadline := time.Now().Add(hangBound)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		n, m := len(s.in), len(s.calls)
		s.mu.Unlock()
		if n == in && m == calls {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the inbox never held %d requests and %d calls", in, calls)
}

// recvErr waits for the answer on ch, failing the test on a hang.
func recvErr(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(hangBound):
		t.Fatalf("%s: no answer after %v: the loop stopped without answering it", what, hangBound)
		return nil
	}
}

// TestDoAndSubmitPendingAtShutdownAreAnswered queues a Do and a Submit while
// the loop is between two steps and its context has just ended: the loop
// leaves without running them, and each must still get ErrStopped (a slot
// restore that races shutdown waits on exactly this Do). The order is fixed
// by the loop itself, not by timing: a first call holds the loop while a
// request and a second call are queued, so the request is in the engine
// (the engine is busy) when a third call holds the loop again; the context
// ends and the pending Do and Submit are queued during it; once it returns
// the busy loop checks its context before anything else and returns.
func TestDoAndSubmitPendingAtShutdownAreAnswered(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	srv := NewServer(newTestEngine(t, m, testConfig()))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan struct{}, 1)
	go func() { srv.Run(ctx); close(ran) }()

	// hold runs a Do whose function reports on entered and waits for release.
	hold := func() (entered, release chan struct{}, result chan error) {
		entered, release, result = make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			result <- srv.Do(func(*Engine) error { close(entered); <-release; return nil })
		}()
		return entered, release, result
	}
	wait := func(ch <-chan struct{}, what string) {
		select {
		case <-ch:
		case <-time.After(hangBound):
			t.Fatalf("%s never happened", what)
		}
	}

	entered1, release1, result1 := hold()
	wait(entered1, "the first call")
	stream := make(chan error, 1)
	var st *Stream
	go func() {
		var err error
		st, err = srv.Submit(Request{ID: 1, Prompt: []int32{1, 2, 3}, MaxTokens: 200, IgnoreEOS: true})
		stream <- err
	}()
	waitPending(t, srv, 1, 0)
	entered2, release2, result2 := hold()
	waitPending(t, srv, 1, 1)
	close(release1)
	require.NoError(t, recvErr(t, result1, "the first call"))
	require.NoError(t, recvErr(t, stream, "the running request's Submit"))
	wait(entered2, "the second call")

	cancel()
	pendingDo := make(chan error, 1)
	go func() {
		pendingDo <- srv.Do(func(*Engine) error { t.Error("a call ran after the loop stopped"); return nil })
	}()
	pendingSubmit := make(chan error, 1)
	go func() {
		_, err := srv.Submit(Request{ID: 2, Prompt: []int32{4, 5}, MaxTokens: 1})
		pendingSubmit <- err
	}()
	waitPending(t, srv, 1, 1)
	close(release2)
	require.NoError(t, recvErr(t, result2, "the second call"))

	require.ErrorIs(t, recvErr(t, pendingDo, "a Do pending at shutdown"), ErrStopped)
	require.ErrorIs(t, recvErr(t, pendingSubmit, "a Submit pending at shutdown"), ErrStopped)
	wait(ran, "Run's return")

	// The running request's stream ends, cancelled, and the engine is empty.
	var last Output
	for range 201 {
		o, ok, err := st.Recv(context.Background())
		require.NoError(t, err)
		if !ok {
			break
		}
		last = o
	}
	require.True(t, last.Done, "the running request's stream ended with a last event")
	require.Equal(t, "cancelled", last.Reason)
	require.False(t, srv.e.Busy(), "the engine holds no sequence after Run")

	// After Run returned, both refuse at once.
	done := make(chan error, 2)
	go func() { done <- srv.Do(func(*Engine) error { t.Error("a call ran after Run returned"); return nil }) }()
	go func() { _, err := srv.Submit(Request{ID: 3, Prompt: []int32{1}, MaxTokens: 1}); done <- err }()
	require.ErrorIs(t, recvErr(t, done, "a Do or Submit after Run returned"), ErrStopped)
	require.ErrorIs(t, recvErr(t, done, "a Do or Submit after Run returned"), ErrStopped)
}
