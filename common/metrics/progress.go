package metrics

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

const progressBarWidth = 30

// Progress is a one-line progress bar redrawn in place with a carriage
// return: done/total, a bar and the elapsed time. A nil *Progress, or one
// with a nil writer, does nothing, so callers need no "if verbose" checks.
type Progress struct {
	mu       sync.Mutex
	w        io.Writer
	total    int
	done     int
	start    time.Time
	now      func() time.Time
	finished bool
}

// NewProgress starts a bar for total items and draws it once.
func NewProgress(w io.Writer, total int) *Progress {
	p := &Progress{w: w, total: total, now: time.Now}
	p.start = p.now()
	p.draw()
	return p
}

// Add records n more finished items and redraws.
func (p *Progress) Add(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	p.done += n
	p.draw()
}

// Finish draws the bar a last time and ends the line, so later output starts
// on a fresh one. Calling it again does nothing.
func (p *Progress) Finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	p.draw()
	if p.w != nil {
		fmt.Fprintln(p.w)
	}
	p.finished = true
}

func (p *Progress) draw() {
	if p.w == nil {
		return
	}
	frac := 1.0
	if p.total > 0 {
		frac = min(1, max(0, float64(p.done)/float64(p.total)))
	}
	filled := int(frac * progressBarWidth)
	bar := strings.Repeat("=", filled) + strings.Repeat(" ", progressBarWidth-filled)
	// Fixed-width fields keep a shorter redraw from leaving stale characters.
	elapsed := p.now().Sub(p.start).Seconds()
	fmt.Fprintf(p.w, "\r%d/%d [%s] %3.0f%% %6.1fs", p.done, p.total, bar, 100*frac, elapsed)
}
