package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"kvlab/common/metrics"
	"kvlab/common/model"
	"kvlab/common/workload"
)

// httpFlags are bench's flags for a server over HTTP instead of an engine
// in the process.
type httpFlags struct {
	url     string
	model   string
	timeout time.Duration
}

func (f *httpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "url", "", "benchmark the server at this URL (http://HOST:PORT) over its OpenAI completions API instead of an engine in this process; "+
		"the engine flags then describe the server only where noted (-block-size: for the 'of optimum' column; -model: for the vocabulary)")
	fs.StringVar(&f.model, "served-model-name", "", "with -url: the model name to send (default: the first id the server's /v1/models lists)")
	fs.DurationVar(&f.timeout, "request-timeout", 10*time.Minute, "with -url: a request not finished after this long fails (0: no limit)")
}

// requests generates the workload without loading the model's weights: the
// vocabulary comes from -vocab, or from the -model directory's config (the
// built-in model's when -model is empty), which must be the server's.
func (f *servingFlags) requests(rf *runtimeFlags) ([]workload.Request, error) {
	p := f.params
	if p.Vocab == 0 {
		var cfg *model.Config
		var err error
		if rf.modelDir != "" {
			cfg, err = model.LoadConfig(rf.modelDir)
		} else {
			var o model.SynthOptions
			if o, err = rf.builtinOptions(); err == nil {
				cfg, err = o.Config()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("vocabulary for the workload (or set -vocab): %w", err)
		}
		p.Vocab = cfg.VocabSize
	}
	return workload.Generate(f.name, p)
}

// runBenchURL is bench -url: the workload against one server.
func runBenchURL(hf httpFlags, rf *runtimeFlags, sf *servingFlags, stdout, stderr io.Writer) error {
	reqs, err := sf.requests(rf)
	if err != nil {
		return err
	}
	progress := sf.progress(stderr)
	fmt.Fprintf(stderr, "%s: %s, %d requests over HTTP\n", hf.url, sf.name, len(reqs))
	t := httpTarget{url: hf.url, model: hf.model, timeout: hf.timeout, blockSize: rf.eng.BlockSize}
	run, na, err := benchHTTP(context.Background(), t, hf.url, reqs, progress)
	if err != nil {
		return err
	}
	return reportHTTP(stdout, []*metrics.Run{run}, [][]string{na},
		sf.reportOptions(fmt.Sprintf("%s over HTTP (%d requests)", sf.name, len(reqs))))
}

// httpTarget is one server to benchmark.
type httpTarget struct {
	url       string
	model     string        // "" asks /v1/models
	timeout   time.Duration // per request
	blockSize int           // the server's KV block size, for the optimum; 0 if unknown
}

// benchHTTP replays reqs against the server in open loop and returns the
// client-side records, with the engine counters its /metrics exposes
// (differences over the run) and the table columns it could not fill.
func benchHTTP(ctx context.Context, t httpTarget, name string, reqs []workload.Request, progress io.Writer) (*metrics.Run, []string, error) {
	client := &http.Client{Transport: newHTTPTransport(), Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	base := strings.TrimRight(t.url, "/")
	if err := getOK(ctx, client, base+"/health", nil); err != nil {
		return nil, nil, fmt.Errorf("%s is not up: %w", base, err)
	}
	if t.model == "" {
		var list struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := getOK(ctx, client, base+"/v1/models", &list); err != nil {
			return nil, nil, fmt.Errorf("%s: listing the models: %w", base, err)
		}
		if len(list.Data) == 0 {
			return nil, nil, fmt.Errorf("%s/v1/models lists no model", base)
		}
		t.model = list.Data[0].ID
	}
	before, beforeErr := scrapeMetrics(ctx, client, base)

	e := newHTTPEngine(ctx, base, t.model, t.timeout)
	run, err := workload.Run(e, reqs, workload.RunOptions{Name: name, Progress: progress})
	e.Close()
	if err != nil {
		return nil, nil, err
	}
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	after, afterErr := scrapeMetrics(ctx, client, base)
	if err := errors.Join(beforeErr, afterErr); err != nil {
		after, before = nil, nil // every engine column is then n/a
	}
	na := fillEngineStats(&run.Engine, before, after, t.blockSize)
	return run, na, nil
}

// getOK GETs url and expects 200, decoding a JSON body into v when v is
// not nil.
func getOK(ctx context.Context, client *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusError(resp)
	}
	if v == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// scrapeMetrics reads the server's Prometheus text exposition and sums
// each metric's samples over their labels.
func scrapeMetrics(ctx context.Context, client *http.Client, base string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp)
	}
	return parsePromText(resp.Body)
}

// parsePromText parses the Prometheus text format far enough for counters
// and gauges: `name{labels} value [timestamp]` lines, with comments and
// blank lines skipped. Samples of one name with different labels are
// summed.
func parsePromText(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ \t"); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.HasPrefix(rest, "{") {
			end := labelsEnd(rest)
			if end < 0 {
				return nil, fmt.Errorf("metrics line %d: unterminated labels", n)
			}
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics line %d: no value", n)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", n, err)
		}
		out[name] += v
	}
	return out, sc.Err()
}

// labelsEnd returns the index of the '}' closing the label set that s
// starts with, skipping quoted values (which may hold '}' and escaped
// quotes), or -1.
func labelsEnd(s string) int {
	quoted := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == '}':
			return i
		}
	}
	return -1
}

// The server's counters each table column needs. Peak blocks and max
// running are the engine's high-water marks, which /metrics does not keep.
const (
	promPrefill     = "kvlab:prefill_tokens_computed_total"
	promDecode      = "kvlab:decode_tokens_computed_total"
	promSteps       = "kvlab:engine_steps_total"
	promHits        = "kvlab:prefix_cache_hits_total"
	promEvictions   = "kvlab:prefix_cache_evictions_total"
	promCopies      = "kvlab:kv_block_copies_total"
	promPreemptions = "kvlab:num_preemptions_total"
	promBlocks      = "kvlab:kv_blocks_capacity"
)

// fillEngineStats sets the EngineStats fields the scrapes before and after
// the run give (counter differences; the pool size as it is after), and
// returns the headers of the table columns left unknown.
func fillEngineStats(s *metrics.EngineStats, before, after map[string]float64, blockSize int) []string {
	delta := func(name string) (int, bool) {
		b, okB := before[name]
		a, okA := after[name]
		return int(a - b), okA && okB
	}
	na := []string{"peak blocks", "max running"}
	set := func(dst *int, name, header string) {
		v, ok := delta(name)
		if ok {
			*dst = v
		} else if header != "" {
			na = append(na, header)
		}
	}
	set(&s.PrefillTokensComputed, promPrefill, "prefill tok")
	set(&s.DecodeTokens, promDecode, "")
	set(&s.Steps, promSteps, "")
	// Without the counter, the hit column falls back to the per-request
	// cached_tokens, which is what the counter sums anyway.
	set(&s.CachedTokens, promHits, "")
	set(&s.Evictions, promEvictions, "evicted")
	set(&s.BlockCopies, promCopies, "CoW")
	set(&s.Preemptions, promPreemptions, "preempted")
	if v, ok := after[promBlocks]; ok {
		s.TotalBlocks = int(v)
	}
	if _, ok := delta(promPrefill); ok && blockSize > 0 {
		s.BlockSize = blockSize
	} else {
		na = append(na, "of optimum %")
	}
	return na
}

// reportHTTP is report with the table's unknown cells shown as n/a
// (na[i] lists run i's unknown columns by header) and a note naming them
// and saying why; the note names columns only -wide shows, too, so a reader
// of the default table knows they would be n/a.
func reportHTTP(stdout io.Writer, runs []*metrics.Run, na [][]string, o reportOptions) error {
	var b strings.Builder
	err := report(&b, runs, o)
	lines := strings.SplitAfter(b.String(), "\n")
	n := min(len(runs)+1, len(lines)) // the header and one row per run
	table := markNA(strings.Join(lines[:n], ""), na)
	io.WriteString(stdout, table)
	var unknown []string
	for _, cols := range na {
		for _, c := range cols {
			if !slices.Contains(unknown, c) {
				unknown = append(unknown, c)
			}
		}
	}
	if len(unknown) > 0 {
		fmt.Fprintf(stdout, "n/a: not in the server's /metrics (%s). Latencies are the client's: TTFT to the first token chunk read, ITL between chunks.\n", strings.Join(unknown, ", "))
	}
	io.WriteString(stdout, strings.Join(lines[n:], ""))
	return err
}

var cellSep = regexp.MustCompile(`\s{2,}`)

// markNA rewrites the rows of a metrics.WriteTable or WriteWideTable table,
// setting the columns row i lists in na[i-1] to "n/a" (those the table does
// not have are left out), and aligns it again: the name column left, the
// others right, two spaces apart.
func markNA(table string, na [][]string) string {
	var rows [][]string
	for line := range strings.Lines(table) {
		rows = append(rows, cellSep.Split(strings.TrimRight(line, " \n"), -1))
	}
	if len(rows) == 0 {
		return table
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for r := 1; r < len(rows) && r-1 < len(na); r++ {
		for _, h := range na[r-1] {
			if i, ok := col[h]; ok && i < len(rows[r]) {
				rows[r][i] = "n/a"
			}
		}
	}
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			if i < len(width) {
				width[i] = max(width[i], len([]rune(c)))
			}
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for i, c := range row {
			pad := strings.Repeat(" ", max(width[min(i, len(width)-1)]-len([]rune(c)), 0))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}
