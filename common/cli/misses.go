package cli

import (
	"kvlab/common/engine"
	"kvlab/common/kvcache/ghost"
	"kvlab/common/kvcache/misses"
	"kvlab/common/metrics"
)

// missTokens is the engine's miss reasons by name, every reason present
// (zeros included) so a table can print them all; nil without a prefix
// cache, where nothing could be reused.
func missTokens(cfg engine.Config, s engine.Stats) map[string]int {
	if cfg.PrefixCache == nil {
		return nil
	}
	m := make(map[string]int, len(misses.Names))
	for i, n := range s.Misses.Counts() {
		m[misses.Names[i]] = n
	}
	return m
}

// withGhosts wraps cfg's prefix cache in ghost caches of every standard
// policy, so that its run also tells what each would have hit (the
// board's report, recorded by addGhosts).
func withGhosts(cfg *engine.Config) *ghost.Board {
	var b *ghost.Board
	cfg.PrefixCache, b = ghost.Wrap(cfg.PrefixCache, ghost.Config{Policies: ghost.Standard(nil)})
	return b
}

// addGhosts records in each run the ghosts' hit rates of its board, the
// boards in the runs' order (nil: the run had none).
func addGhosts(runs []*metrics.Run, boards []*ghost.Board) {
	for i, b := range boards {
		if b != nil && i < len(runs) {
			runs[i].Engine.Ghosts = ghostRates(b.Report())
		}
	}
}

// ghostRates is a ghost report's rows as a run records them.
func ghostRates(r ghost.Report) []metrics.GhostRate {
	out := make([]metrics.GhostRate, len(r.Rows))
	for i, row := range r.Rows {
		out[i] = metrics.GhostRate{Name: row.Name, Hits: row.Hits, HitRate: row.HitRate}
	}
	return out
}
