package main

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/phase08_leak/leak"
)

// TestAttackMechanics runs a short attack against servers on loopback
// ports: without salts the right guess finds the victim's secret cached,
// with a salt per tenant it finds nothing, and a wrong guess never does.
// (The timings are not checked: they are the machine's.)
func TestAttackMechanics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := leak.LeakConfig{Secret: 64, Calibrate: 1, Trials: 2, Seed: 1}
	for _, mode := range []struct {
		victim, attacker string
		cached           int
		args             []string
	}{
		{"", "", 64, nil},
		{"tenant-victim", "tenant-attacker", 0, nil},
		// The share cap partitions the cache by salt and keeps both rules.
		{"", "", 64, []string{"-tenant-cache-share", "0.5"}},
		{"tenant-victim", "tenant-attacker", 0, []string{"-tenant-cache-share", "0.5"}},
	} {
		s, err := leak.StartServer(ctx, server, append([]string{"-prefix-caching"}, mode.args...), io.Discard)
		require.NoError(t, err)
		r, err := leak.Attack(ctx, s.Client(), mode.victim, mode.attacker, cfg)
		require.NoError(t, err)
		require.NoError(t, s.Stop())
		assert.Equal(t, mode.cached, r.RightCached, "right guess, victim salt %q", mode.victim)
		assert.Equal(t, 0, r.WrongCached, "wrong guess, victim salt %q", mode.victim)
		assert.Equal(t, 4, r.Judged)
	}
}

// TestProgramPrintsItsTables runs the whole program with a short attack
// and checks the tables, and the deterministic rows the docs quote: the
// cost of salting (usage over HTTP, one request at a time) and the noisy
// neighbour (engines stepped in process).
func TestProgramPrintsItsTables(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five servers and runs six engines (about 20 s)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"-secret", "64", "-calibrate", "1", "-trials", "2"}, &out, io.Discard))
	s := out.String()
	for _, want := range []string{
		"| cache salts | right guess TTFT p50 | wrong guess TTFT p50 | threshold | held-out accuracy |",
		"| none | ", "| one per tenant | ",
		"| no salt | 6528 | 5632 | 86.3% |",
		"| salt per tenant | 6528 | 4096 | 62.7% |",
		"| one salt for the shared-prompt service | 6528 | 5632 | 86.3% |",
		"| radix tree (prefix) | 0.0% (0/1152) | 77.8% (896/1152) |",
		"| hash + CoW (hashcow) | 0.0% (0/1152) | 77.8% (896/1152) |",
		"| compressed trie | 0.0% (0/1152) | 77.8% (896/1152) |",
	} {
		assert.Contains(t, s, want)
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-secret", "8"}, {"-tenant-cache-share", "0"}, {"-only", "x"}} {
		_, err := parse(args, io.Discard)
		assert.Error(t, err, "%v", args)
	}
}
