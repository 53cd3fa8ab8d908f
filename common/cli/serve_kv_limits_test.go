package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestServeKVEventLimitFlags: a KV-event limit that is not positive is
// refused before anything starts, with the flag's name.
func TestServeKVEventLimitFlags(t *testing.T) {
	for _, c := range []struct{ flag, value, want string }{
		{"-kv-events-buffer-bytes", "0", "-kv-events-buffer-bytes must be > 0, have 0"},
		{"-kv-events-hwm", "-1", "-kv-events-hwm must be > 0, have -1"},
		{"-kv-events-max-subscribers", "0", "-kv-events-max-subscribers must be > 0"},
		{"-kv-events-write-timeout", "0s", "-kv-events-write-timeout must be > 0"},
	} {
		args := []string{"-port", "0", "-prefix-caching", "-kv-events-endpoint", "tcp://127.0.0.1:1", c.flag, c.value}
		err := Serve(context.Background(), cachedVariant, args, nil, &syncBuffer{})
		assert.ErrorContains(t, err, c.want, c.flag)
	}
}
