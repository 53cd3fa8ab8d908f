package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestProgress(t *testing.T) {
	var b strings.Builder
	p := NewProgress(&b, 4)
	start := p.start
	p.now = func() time.Time { return start.Add(1500 * time.Millisecond) }
	p.Add(1)
	p.Add(3)
	p.Finish()
	p.Finish()
	p.Add(1) // after Finish: ignored

	out := b.String()
	assert.Equal(t, 4, strings.Count(out, "\r"), "have %q; want the initial draw, two updates and the final one", out)
	assert.True(t, strings.HasSuffix(out, "\n"), "have %q; want a final newline", out)
	assert.Equal(t, 1, strings.Count(out, "\n"))
	assert.Contains(t, out, "1/4 [")
	assert.Contains(t, out, "4/4 ["+strings.Repeat("=", progressBarWidth)+"] 100%    1.5s")
}

func TestProgressNilSafe(t *testing.T) {
	var p *Progress
	p.Add(1)
	p.Finish()

	q := NewProgress(nil, 3)
	q.Add(1)
	q.Finish()
}
