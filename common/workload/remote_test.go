package workload

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRemoteHandsBackEventsAndCountsRequestsOpen(t *testing.T) {
	r := NewRemote(context.Background())
	release := make(chan struct{})
	r.Start(func(context.Context) {
		r.Push(Token{ID: 1, Token: 5})
		<-release
		r.SetCached(1, 16)
		r.Push(Token{ID: 1, Token: 6, Done: true})
	})
	r.Start(func(ctx context.Context) {
		<-ctx.Done() // runs until Close
		r.Push(Token{ID: 2, Err: errors.New("aborted")})
	})
	assert.True(t, r.Busy())
	first := r.Wait(-1)
	require.Equal(t, []Token{{ID: 1, Token: 5}}, first)
	assert.Empty(t, r.Step(), "nothing more until the request goes on")
	close(release)
	last := r.Wait(-1)
	require.Equal(t, []Token{{ID: 1, Token: 6, Done: true}}, last)
	assert.Equal(t, 16, r.CachedTokens(1))
	assert.True(t, r.Busy(), "request 2 is still open")
	assert.Empty(t, r.Wait(time.Millisecond), "a bounded wait comes back empty")

	r.Close()
	assert.True(t, r.Aborted())
	require.Len(t, r.Step(), 1, "the aborted request's error event")
	assert.False(t, r.Busy())
}
