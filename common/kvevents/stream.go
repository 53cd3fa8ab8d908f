package kvevents

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// StreamPath is the HTTP route an engine serves its events on: a
// server-sent-event stream whose every event's data is one JSON Batch. The
// first batch describes the whole cache (AllBlocksCleared, then a
// BlockStored for every block held), so a subscriber that connects late, or
// reconnects, starts from the truth and not from a stale view.
const StreamPath = "/v1/kv_events"

// ReadStream reads the server-sent events of r and calls fn with each batch,
// in order. It returns nil when r ends, fn's error if fn fails, ctx's error
// once ctx is done, and an error for an event whose data is not a Batch.
// Cancelling ctx cannot interrupt a read that blocks; with an HTTP response
// body, make the request with the same ctx so the read fails too.
func ReadStream(ctx context.Context, r io.Reader, fn func(Batch) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20) // the first batch lists the whole cache
	var data []byte
	have := false
	for sc.Scan() {
		if err := ctx.Err(); err != nil {
			return err
		}
		line := sc.Bytes()
		switch {
		case len(line) == 0: // end of one event
			if !have {
				continue
			}
			var b Batch
			if err := json.Unmarshal(data, &b); err != nil {
				return fmt.Errorf("kvevents: event data is not a batch: %w", err)
			}
			if err := fn(b); err != nil {
				return err
			}
			data, have = data[:0], false
		case line[0] == ':': // a comment, such as a keep-alive
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			if string(field) != "data" {
				continue // event:, id:, retry: carry nothing a batch needs
			}
			if have { // the SSE rule: several data lines join with newlines
				data = append(data, '\n')
			}
			data, have = append(data, value...), true
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("kvevents: reading the stream: %w", err)
	}
	return nil
}
