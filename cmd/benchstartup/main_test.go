package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestStatusKB(t *testing.T) {
	kb := statusKB([]byte("Name:\tphase08_prefix\nVmHWM:\t 1250000 kB\nVmRSS:\t 1249000 kB\nRssAnon:\t   67584 kB\nRssFile:\t 1181416 kB\nThreads:\t7\n"))
	assert.Equal(t, map[string]float64{"VmHWM": 1250000, "VmRSS": 1249000, "RssAnon": 67584, "RssFile": 1181416}, kb)
}

func TestMedians(t *testing.T) {
	rs := []result{
		{listening: 3 * time.Second, first: 4 * time.Second, rss: 10},
		{listening: 1 * time.Second, first: 2 * time.Second, rss: 30},
		{listening: 2 * time.Second, first: 9 * time.Second, rss: 20},
	}
	m := medians(rs)
	assert.Equal(t, 2*time.Second, m.listening)
	assert.Equal(t, 4*time.Second, m.first)
	assert.Equal(t, 20.0, m.rss)
}
