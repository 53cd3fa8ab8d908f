// Command benchstartup measures how soon a server answers after it is
// started, and how much memory it holds then:
//
//	go run ./cmd/benchstartup -runs 5 -- ./bin/phase08_prefix serve -model DIR
//
// Each run starts the command with -port P appended, reads its stderr, and
// posts one completion (prompt "Hello", max_tokens 1) every 5 ms until one
// is answered. It reports, from the exec: when the listening line appeared,
// when the first answer came; then the time of a second, identical request
// (a forward whose pages are all in memory), and the server's RSS after
// it, split as /proc/PID/status splits it into anonymous memory and pages
// of mapped files; and the server's own load line when it prints one.
// Then the server gets SIGTERM. The last line holds each figure's median.
//
// With -cold, each run first writes 3 to /proc/sys/vm/drop_caches (root
// only), so the checkpoint is read from disk, not the page cache. RSS is
// read from /proc: Linux only.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kvlab/internal/benchrun"
)

func main() {
	runs := flag.Int("runs", 5, "server starts to time; the medians are printed last")
	cold := flag.Bool("cold", false, "drop the page cache before each start (writes /proc/sys/vm/drop_caches; root only)")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up on a server that has not answered by then")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), "benchstartup: time from starting a server to its first answer, and its RSS then\n\nUsage: benchstartup [flags] -- SERVER-COMMAND [ARGS]\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 || *runs < 1 {
		flag.Usage()
		os.Exit(2)
	}
	var all []result
	for i := range *runs {
		if *cold {
			if err := dropCaches(); err != nil {
				fmt.Fprintln(os.Stderr, "benchstartup: -cold:", err)
				os.Exit(1)
			}
		}
		r, err := start(flag.Args(), *timeout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchstartup:", err)
			os.Exit(1)
		}
		fmt.Printf("run %d: %s\n", i, r)
		all = append(all, r)
	}
	fmt.Printf("median: %s\n", medians(all))
}

// result is one start's figures. Times are from the exec; memory in MiB.
type result struct {
	listening, first, second time.Duration
	rss, anon, file          float64
	loadLine                 string
}

func (r result) String() string {
	s := fmt.Sprintf("listening %.2f s, first answer %.2f s, second request %.3f s; RSS %.0f MiB (%.0f anonymous, %.0f of mapped files)",
		r.listening.Seconds(), r.first.Seconds(), r.second.Seconds(), r.rss, r.anon, r.file)
	if r.loadLine != "" {
		s += " | " + r.loadLine
	}
	return s
}

func medians(rs []result) result {
	pick := func(f func(result) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return benchrun.Median(xs)
	}
	sec := func(f func(result) time.Duration) time.Duration {
		return time.Duration(pick(func(r result) float64 { return float64(f(r)) }))
	}
	return result{
		listening: sec(func(r result) time.Duration { return r.listening }),
		first:     sec(func(r result) time.Duration { return r.first }),
		second:    sec(func(r result) time.Duration { return r.second }),
		rss:       pick(func(r result) float64 { return r.rss }),
		anon:      pick(func(r result) float64 { return r.anon }),
		file:      pick(func(r result) float64 { return r.file }),
	}
}

func dropCaches() error {
	syscall.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0)
}

// start runs one server to its second answer.
func start(argv []string, timeout time.Duration) (result, error) {
	port, err := freePort()
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], "-port", strconv.Itoa(port))...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return result{}, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	lines := make(chan line, 64)
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		for range lines { // the pipe must be read to its end before Wait
		}
		cmd.Wait()
	}()
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- line{sc.Text(), time.Now()}
		}
	}()
	var r result
	var log []string
	read := func(l line) {
		log = append(log, l.text)
		switch {
		case strings.Contains(l.text, "model loaded"):
			_, r.loadLine, _ = strings.Cut(l.text, ": ")
		case strings.Contains(l.text, "listening on") && r.listening == 0:
			r.listening = l.at.Sub(t0)
		}
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/completions", port)
	for {
		if err := complete(ctx, url); err == nil {
			break
		} else if ctx.Err() != nil {
			return result{}, fmt.Errorf("no answer within %v: %v\n%s", timeout, err, strings.Join(log, "\n"))
		}
		for drained := false; !drained; {
			select {
			case l, ok := <-lines:
				if !ok {
					return result{}, fmt.Errorf("%s exited before answering\n%s", argv[0], strings.Join(log, "\n"))
				}
				read(l)
			default:
				drained = true
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.first = time.Since(t0)
	t1 := time.Now()
	if err := complete(ctx, url); err != nil {
		return result{}, err
	}
	r.second = time.Since(t1)
	// The listening and load lines came before the first answer.
	for drained := false; !drained; {
		select {
		case l, ok := <-lines:
			if !ok {
				drained = true
				break
			}
			read(l)
		default:
			drained = true
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		return result{}, fmt.Errorf("reading the server's RSS: %w", err)
	}
	kb := statusKB(status)
	r.rss, r.anon, r.file = kb["VmRSS"]/1024, kb["RssAnon"]/1024, kb["RssFile"]/1024
	return r, nil
}

// line is a line of the server's stderr and when it was read.
type line struct {
	text string
	at   time.Time
}

// complete posts one one-token completion and reads the whole answer.
func complete(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"prompt": "Hello", "max_tokens": 1, "temperature": 0}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

// statusKB returns the "Key: N kB" fields of a /proc/PID/status.
func statusKB(status []byte) map[string]float64 {
	out := map[string]float64{}
	for _, line := range bytes.Split(status, []byte("\n")) {
		key, val, ok := strings.Cut(string(line), ":")
		if !ok {
			continue
		}
		num, unit, _ := strings.Cut(strings.TrimSpace(val), " ")
		if unit != "kB" {
			continue
		}
		if n, err := strconv.ParseFloat(num, 64); err == nil {
			out[key] = n
		}
	}
	return out
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
