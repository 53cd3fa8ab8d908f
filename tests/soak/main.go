// Command soak runs `phase08_prefix serve --prefix-caching` in this process
// and throws minutes of mixed, partly hostile HTTP load at it over
// loopback, then checks that the server held: every request ended in
// exactly one counted outcome, no KV block leaked, the goroutines came back
// to where they started, and the block audit at shutdown is clean.
//
// The flow: start the server on a free loopback port; record goroutines
// and RSS once it is idle; run -clients workers until -duration is up,
// each drawing one kind of client at a time (below); wait for the server
// to go idle; compare the server's outcome counters with what was sent;
// shut down (which audits the pool); print one table; exit 1 if anything
// was lost or leaked.
//
//	go run ./tests/soak                    # two minutes (make soak)
//	go run ./tests/soak -duration 10s
//
// The kinds of client:
//
//	complete    a short non-streaming completion
//	stream      a streaming completion, read to [DONE]
//	chat        a streaming chat completion without max_tokens: it runs to
//	            the context limit and must end with "length" and [DONE]
//	disconnect  a stream that hangs up after its first event
//	slow        a stream of 16 long samples from a socket that reads nothing
//	            for 15–30 s (-slow-wait), then hangs up: the server must cut it (write
//	            deadline or unread budget), never stall
//	flood       50 tiny requests at once (some get 429 from --max-queue)
//	bad         malformed or impossible input, which must be refused
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"kvlab/common/cli"
	"kvlab/phase08_prefix/radix"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// kinds are the clients, in the order the table lists them.
var kinds = []string{"complete", "stream", "chat", "disconnect", "slow", "flood", "bad"}

// tally counts, per kind of client, the requests sent and how each came
// back to the client.
type tally struct {
	mu    sync.Mutex
	sent  map[string]int
	codes map[string]map[int]int // kind → HTTP status → count (0: no response, as intended by the client)
	lost  map[string]int         // requests that came back wrong, by what happened
	ttfts []time.Duration        // streams' time to the first event
}

func (t *tally) add(kind string, status int, lost string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sent[kind]++
	if t.codes[kind] == nil {
		t.codes[kind] = map[int]int{}
	}
	t.codes[kind][status]++
	if lost != "" {
		t.lost[kind+": "+lost]++
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "soak: mixed hostile HTTP load against an in-process `phase08_prefix serve --prefix-caching`; exits 1 if a request was lost, a block leaked or goroutines did not come back\n\nFlags:")
		fs.PrintDefaults()
	}
	duration := fs.Duration("duration", 2*time.Minute, "how long the load runs")
	clients := fs.Int("clients", 8, "concurrent clients")
	seed := fs.Uint64("seed", 1, "seed of the clients' choices")
	slowWait := fs.Duration("slow-wait", 15*time.Second, "a slow client reads nothing for this long plus up to as long again: long enough that its output outgrows the socket buffers (megabytes)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *duration <= 0 || *clients <= 0 || *slowWait <= 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "soak: -duration, -clients and -slow-wait must be positive, and there are no arguments")
		return 2
	}

	// The server: small limits so that every defence is exercised within
	// seconds (a 5 s write deadline, a 512-event unread budget, a queue of
	// 64, a 2048-token context), and the audit after every step.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	addrc := make(chan string, 1)
	served := make(chan error, 1)
	var log strings.Builder
	variant := cli.Variant{Name: "phase08_prefix", PrefixCache: radix.New}
	go func() {
		served <- cli.Serve(ctx, variant, []string{"-prefix-caching", "-port", "0", "-audit",
			"-write-timeout", "5s", "-max-unread", "512", "-max-queue", "64", "-blocks", "2048", "-max-context", "2048", "-shutdown-timeout", "5s"},
			func(addr string) { addrc <- addr }, &syncWriter{w: &log})
	}()
	var url string
	select {
	case addr := <-addrc:
		url = "http://" + addr
	case err := <-served:
		fmt.Fprintf(stderr, "soak: the server did not start: %v\n%s", err, log.String())
		return 1
	}
	waitIdle(url)
	goBefore, rssBefore := runtime.NumGoroutine(), rss()

	t := &tally{sent: map[string]int{}, codes: map[string]map[int]int{}, lost: map[string]int{}}
	deadline := time.Now().Add(*duration)
	var wg sync.WaitGroup
	for c := range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(*seed, uint64(c)))
			// Every kind once, whatever the duration; then at random.
			for i := range kinds {
				clientOf[kinds[(c+i)%len(kinds)]](url, rng, t, *slowWait)
			}
			for time.Now().Before(deadline) {
				kind := kinds[rng.IntN(len(kinds))]
				clientOf[kind](url, rng, t, *slowWait)
			}
		}()
	}
	wg.Wait()
	http.DefaultClient.CloseIdleConnections()

	// Every handler has returned once the outcome counters add up.
	total := 0
	for _, n := range t.sent {
		total += n
	}
	var outcomes map[string]float64
	settle := time.Now().Add(30 * time.Second)
	for {
		outcomes = scrapeOutcomes(url)
		if sum(outcomes) == float64(total) || time.Now().After(settle) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitIdle(url)
	m := scrape(url)
	// Kept partial blocks (-tail-blocks) are held by the pool on purpose.
	leaked := m["kvlab:kv_blocks_used"] - m["kvlab:kv_blocks_cached"] - m["kvlab:kv_tail_blocks_held"]
	time.Sleep(200 * time.Millisecond) // handlers' goroutines finish returning
	goAfter, rssAfter := runtime.NumGoroutine(), rss()

	stop()
	serveErr := <-served
	audit := "clean"
	if serveErr != nil {
		audit = serveErr.Error()
	}

	// The report.
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(stdout, "soak: %v of load, %d clients, %d CPUs, phase08_prefix serve --prefix-caching\n", *duration, *clients, runtime.NumCPU())
	fmt.Fprintln(tw, "client\tsent\tanswers by HTTP status\t")
	for _, k := range kinds {
		fmt.Fprintf(tw, "%s\t%d\t%s\t\n", k, t.sent[k], statuses(t.codes[k]))
	}
	tw.Flush()
	fmt.Fprintf(stdout, "server outcomes: stop %.0f, length %.0f, abort %.0f, error %.0f, rejected %.0f; sum %.0f of %d requests sent\n",
		outcomes["stop"], outcomes["length"], outcomes["abort"], outcomes["error"], outcomes["rejected"], sum(outcomes), total)
	fmt.Fprintf(stdout, "requests cut for reading too slowly: %.0f\n", m["kvlab:requests_too_slow_total"])
	p50, p99 := percentile(t.ttfts, 0.5), percentile(t.ttfts, 0.99)
	fmt.Fprintf(stdout, "stream TTFT p50 %v, p99 %v (%d streams)\n", p50.Round(time.Millisecond), p99.Round(time.Millisecond), len(t.ttfts))
	fmt.Fprintf(stdout, "goroutines %d before, %d after; RSS %.1f MB before, %.1f MB after\n", goBefore, goAfter, rssBefore, rssAfter)
	fmt.Fprintf(stdout, "KV blocks held by no one after the load: %.0f; audit at shutdown: %s\n", leaked, audit)

	var problems []string
	if lost := float64(total) - sum(outcomes); lost != 0 {
		problems = append(problems, fmt.Sprintf("%.0f requests without an outcome", lost))
	}
	for what, n := range t.lost {
		problems = append(problems, fmt.Sprintf("%d × %s", n, what))
	}
	if leaked != 0 {
		problems = append(problems, fmt.Sprintf("%.0f KV blocks leaked", leaked))
	}
	if goAfter > goBefore+2 { // the tally's own goroutines are gone; allow the runtime's
		problems = append(problems, fmt.Sprintf("goroutines grew from %d to %d", goBefore, goAfter))
	}
	if serveErr != nil {
		problems = append(problems, "shutdown: "+serveErr.Error())
	}
	if len(problems) > 0 {
		fmt.Fprintf(stdout, "FAILED: %s\n", strings.Join(problems, "; "))
		return 1
	}
	fmt.Fprintln(stdout, "held: 0 lost requests, 0 leaked blocks, goroutines back to baseline")
	return 0
}

// clientOf runs one client of each kind: it sends its request(s) and adds
// what came back to t.
var clientOf = map[string]func(url string, rng *rand.Rand, t *tally, slowWait time.Duration){
	"complete": func(url string, rng *rand.Rand, t *tally, slowWait time.Duration) {
		status, body, err := post(url+"/v1/completions", fmt.Sprintf(`{"prompt": %s, "max_tokens": %d}`, prompt(rng), 1+rng.IntN(16)))
		t.add("complete", status, expect(status == 429 || status == 200 && strings.Contains(body, `"finish_reason"`), status, err))
	},
	"stream": func(url string, rng *rand.Rand, t *tally, slowWait time.Duration) {
		streamClient(url, "stream", "/v1/completions", fmt.Sprintf(`{"prompt": %s, "max_tokens": %d, "n": %d, "stream": true}`, prompt(rng), 1+rng.IntN(32), 1+rng.IntN(4)), t)
	},
	"chat": func(url string, rng *rand.Rand, t *tally, slowWait time.Duration) {
		streamClient(url, "chat", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "Tell me about caches."}], "ignore_eos": true, "stream": true}`, t)
	},
	"disconnect": func(url string, rng *rand.Rand, t *tally, slowWait time.Duration) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions",
			strings.NewReader(fmt.Sprintf(`{"prompt": %s, "max_tokens": 400, "ignore_eos": true, "stream": true}`, prompt(rng))))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.add("disconnect", 0, err.Error())
			return
		}
		_, err = bufio.NewReader(resp.Body).ReadString('\n')
		cancel() // hang up after the first event
		resp.Body.Close()
		t.add("disconnect", resp.StatusCode, expect(resp.StatusCode == 200 || resp.StatusCode == 429, resp.StatusCode, err))
	},
	"slow": func(url string, rng *rand.Rand, t *tally, slowWait time.Duration) {
		c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.add("slow", 0, err.Error())
			return
		}
		defer c.Close()
		_ = c.(*net.TCPConn).SetReadBuffer(4096)
		// 16 samples of 2000 tokens: 5 MB of events, more than the
		// socket buffers hold, so the server's writes block.
		body := `{"prompt": [1, 2, 3, 4], "n": 16, "max_tokens": 2000, "ignore_eos": true, "stream": true}`
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		time.Sleep(slowWait + time.Duration(rng.Int64N(int64(slowWait)))) // reads nothing meanwhile
		t.add("slow", 0, "")                                              // no answer expected: the client walks away
	},
	"flood": func(url string, rng *rand.Rand, t *tally, slowWait time.Duration) {
		var wg sync.WaitGroup
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, _, err := post(url+"/v1/completions", `{"prompt": [7, 8, 9], "max_tokens": 2}`)
				t.add("flood", status, expect(status == 200 || status == 429, status, err))
			}()
		}
		wg.Wait()
	},
	"bad": func(url string, rng *rand.Rand, t *tally, slowWait time.Duration) {
		bodies := []string{`{"prompt": [1, 2`, `[1, 2]`, `{"prompt": [1, 2.5, 5]}`, `{"prompt": [1], "n": 99}`,
			`{"prompt": [1, 2], "max_tokens": 100000000}`, `{"prompt": [[[1]]]}`, `{"prompt": [1, 99999999]}`, `{"prompt": [1], "grammar": "root ::= [a]"}`}
		status, body, err := post(url+"/v1/completions", bodies[rng.IntN(len(bodies))])
		t.add("bad", status, expect(status >= 400 && status < 500 && strings.Contains(body, `"code"`), status, err))
	},
}

// streamClient posts a streaming request, reads it to the end and checks
// that it ends with a finish_reason and [DONE] (or is refused with 429).
func streamClient(url, kind, path, body string, t *tally) {
	start := time.Now()
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.add(kind, 0, err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		t.add(kind, resp.StatusCode, "")
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var first time.Duration
	last, finished := "", false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if first == 0 {
			first = time.Since(start)
		}
		last = data
		finished = finished || strings.Contains(data, `"finish_reason":"`)
	}
	if first > 0 {
		t.mu.Lock()
		t.ttfts = append(t.ttfts, first)
		t.mu.Unlock()
	}
	t.add(kind, resp.StatusCode, expect(resp.StatusCode == 200 && finished && last == "[DONE]", resp.StatusCode, sc.Err()))
}

// expect returns "" when ok, else what went wrong.
func expect(ok bool, status int, err error) string {
	switch {
	case ok:
		return ""
	case err != nil:
		return fmt.Sprintf("status %d: %v", status, err)
	}
	return fmt.Sprintf("unexpected answer, status %d", status)
}

func post(url, body string) (int, string, error) {
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// prompt returns a token-id prompt: one of four shared 32-token prefixes
// and a few tokens of its own, so the prefix cache is exercised.
func prompt(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteString("[")
	p := rng.IntN(4)
	for i := range 32 {
		fmt.Fprintf(&b, "%d, ", 1+(p*37+i*11)%500)
	}
	for range 1 + rng.IntN(12) {
		fmt.Fprintf(&b, "%d, ", 1+rng.IntN(500))
	}
	return strings.TrimSuffix(b.String(), ", ") + "]"
}

// scrape reads every unlabelled series and the outcome counters from
// /metrics.
func scrape(url string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, v, ok := strings.Cut(line, " ")
		if f, err := strconv.ParseFloat(v, 64); ok && err == nil {
			out[name] = f
		}
	}
	return out
}

func scrapeOutcomes(url string) map[string]float64 {
	m := scrape(url)
	out := map[string]float64{}
	for _, r := range []string{"stop", "length", "abort"} {
		out[r] = m[`kvlab:request_success_total{finished_reason="`+r+`"}`]
	}
	for _, r := range []string{"error", "rejected"} {
		out[r] = m[`kvlab:request_failure_total{reason="`+r+`"}`]
	}
	return out
}

func sum(m map[string]float64) float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s
}

// waitIdle waits until the engine runs and queues nothing.
func waitIdle(url string) {
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		m := scrape(url)
		if m["kvlab:num_requests_running"] == 0 && m["kvlab:num_requests_waiting"] == 0 {
			return
		}
	}
}

// statuses formats a status histogram, e.g. "200×31 429×4".
func statuses(codes map[int]int) string {
	keys := make([]int, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		name := strconv.Itoa(k)
		if k == 0 {
			name = "none"
		}
		parts = append(parts, fmt.Sprintf("%s×%d", name, codes[k]))
	}
	return strings.Join(parts, " ")
}

func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// rss returns this process's resident memory in MB (0 where /proc is
// missing).
func rss() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// syncWriter serialises writes to w (the server logs from several
// goroutines).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
