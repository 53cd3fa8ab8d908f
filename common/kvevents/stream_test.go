package kvevents

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadStream(t *testing.T) {
	h := BlockHashes([]int32{1, 2, 3, 4, 5, 6, 7, 8}, 4, "")
	// Written by hand the way the SSE spec allows: a comment, an event:
	// field, a batch split over two data lines, CRLF-free LF endings.
	stream := ": keep-alive\n\n" +
		"event: kv\ndata: {\"ts\": 1.5, \"events\": [{\"type\": \"AllBlocksCleared\"}]}\n\n" +
		"data: {\"ts\": 2, \"events\": [{\"type\": \"BlockStored\", \"block_hashes\": [\"" + h[1].String() + "\"],\n" +
		"data: \"parent_block_hash\": \"" + h[0].String() + "\", \"token_ids\": [5,6,7,8], \"block_size\": 4}]}\n\n" +
		"data: {\"ts\": 3, \"events\": [{\"type\": \"BlockRemoved\", \"block_hashes\": [\"" + h[0].String() + "\"]}]}\n\n"
	var got []Batch
	require.NoError(t, ReadStream(context.Background(), strings.NewReader(stream), func(b Batch) error {
		got = append(got, b)
		return nil
	}))
	want := []Batch{
		{TS: 1.5, Events: []Event{{Type: AllBlocksCleared}}},
		{TS: 2, Events: []Event{{Type: BlockStored, BlockHashes: []Hash{h[1]}, ParentBlockHash: &h[0], TokenIDs: []int32{5, 6, 7, 8}, BlockSize: 4}}},
		{TS: 3, Events: []Event{{Type: BlockRemoved, BlockHashes: []Hash{h[0]}}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
}

func TestReadStreamErrors(t *testing.T) {
	stop := errors.New("stop")
	one := "data: {\"ts\": 1, \"events\": []}\n\n"
	err := ReadStream(context.Background(), strings.NewReader(one+one), func(Batch) error { return stop })
	assert.ErrorIs(t, err, stop)

	err = ReadStream(context.Background(), strings.NewReader("data: [1,2]\n\n"), func(Batch) error { return nil })
	assert.ErrorContains(t, err, "not a batch")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = ReadStream(ctx, strings.NewReader(one), func(Batch) error { return nil })
	assert.ErrorIs(t, err, context.Canceled)
}
