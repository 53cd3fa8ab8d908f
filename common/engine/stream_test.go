package engine

import (
	"context"
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
			for o := range ch { // closed after the last event
				assert.Equal(t, len(toks), o.Index)
				toks = append(toks, o.Token)
			}
			assert.Equal(t, want[r.ID].Tokens, toks, "request %d", r.ID)
		}()
	}
	wg.Wait()
}
