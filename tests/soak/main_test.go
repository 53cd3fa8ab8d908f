package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestShortSoak runs the soak for a few seconds, every kind of client
// included: the report must say the server held. `make soak` runs the
// same for two minutes.
func TestShortSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and loads it for seconds")
	}
	var out, errs strings.Builder
	code := run([]string{"-duration", "4s", "-clients", "4", "-slow-wait", "300ms"}, &out, &errs)
	assert.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out.String(), errs.String())
	assert.Contains(t, out.String(), "held: 0 lost requests, 0 leaked blocks")
	for _, kind := range kinds {
		assert.Regexp(t, `(?m)^ *`+kind+` +[1-9][0-9]* `, out.String(), "the table lists %s with requests sent", kind)
	}
}
