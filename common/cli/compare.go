package cli

import (
	"flag"
	"fmt"
	"io"
	"strconv"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/bound"
	"kvlab/common/kvcache/ghost"
	"kvlab/common/metrics"
)

// Compare runs the baseline engine and every variant in one process on the
// same requests and arrivals, prints one table, writes an SVG plot of TTFT
// per request, and fails unless each variant produced exactly the
// baseline's tokens. It returns the process exit code.
//
// With -servers, each configuration is a server process instead (see
// compareHTTP) and is measured over HTTP at the client.
func Compare(variants []Variant, args []string, stdout, stderr io.Writer) int {
	return exitCode(compare(variants, args, stdout, stderr), stderr, "phase08")
}

func compare(variants []Variant, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("phase08", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "phase08: the baseline engine and each prefix cache on the same requests and arrivals, one table\n\nUsage: phase08 [flags]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var rf runtimeFlags
	rf.register(fs, Variant{})
	admission := fs.String("admission", "cost-aware", "how admission charges a prompt: conservative or cost-aware")
	commit := fs.String("commit", "chunk", "when computed KV enters the prefix caches: chunk (after every prefill chunk) or prompt-end (only once the whole prompt is computed)")
	var sf servingFlags
	sf.register(fs, args, "phase08")
	var srv serverFlags
	srv.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	rf.admission, rf.commit = *admission, *commit
	sf.resolvePlot(fs, &rf)
	if srv.servers != "" {
		if err := sf.wallClockOnly("-servers"); err != nil {
			return err
		}
		return compareHTTP(fs, variants, srv, &rf, &sf, stdout, stderr)
	}
	stop, err := rf.startProfiles()
	if err != nil {
		return err
	}
	defer stop()
	m, reqs, err := sf.load(&rf)
	if err != nil {
		return err
	}
	defer m.Close() // unmaps the weights; the engines, closed by later defers, go first
	// The baseline has no cache to cap; each design gets the share cap.
	share := rf.share
	rf.share = 0
	base, err := rf.engineConfig(Variant{})
	if err != nil {
		return err
	}
	configs := []namedConfig{{"baseline", base}}
	var recs []*bound.Recorder    // each design's run, for the bound on its hit rate
	boards := []*ghost.Board{nil} // each design's ghosts; the baseline has none
	for _, v := range variants {
		c := base
		c.PrefixCache = v.PrefixCache
		if share > 0 {
			c.PrefixCache = kvcache.ShareCapped(v.PrefixCache, share)
		}
		boards = append(boards, withGhosts(&c))
		rec := bound.NewRecorder()
		c.PrefixCache = rec.Wrap(c.PrefixCache) // outermost: it records what the pool asks
		recs = append(recs, rec)
		configs = append(configs, namedConfig{v.Name, c})
	}
	runs, err := sf.serveRuns(m, configs, reqs, stdout, stderr)
	if err != nil {
		return err
	}
	writeBounds(stdout, variants, recs)
	addGhosts(runs, boards)
	metrics.WriteMisses(stdout, runs)
	metrics.WriteGhosts(stdout, runs)
	return nil
}

// writeBounds prints, for each design's run, its hit rate beside the best
// any eviction schedule could have reached at its pool's size and an
// infinite cache's (common/kvcache/bound, computed from what the run's
// pool asked its cache); for a tree, where the best lies between the
// leaves' rule and the optimum, both when they differ.
func writeBounds(w io.Writer, variants []Variant, recs []*bound.Recorder) {
	pct := func(r bound.Report, hits int) string { return strconv.FormatFloat(100*r.Rate(hits), 'f', 1, 64) }
	fmt.Fprintln(w, "hit % achieved / optimal / infinite (the best any eviction could reach at the pool's size, common/kvcache/bound):")
	for i, rec := range recs {
		r := rec.Report()
		optimal := pct(r, r.Optimal)
		if r.Leaves < r.Optimal {
			optimal = pct(r, r.Leaves) + "–" + optimal
		}
		fmt.Fprintf(w, "  %s: %s / %s / %s\n", variants[i].Name, pct(r, r.Achieved), optimal, pct(r, r.Infinite))
	}
}
