package main

import (
	"fmt"
	"strconv"
	"strings"
)

// The default rows run both servers as shipped: each gets only the flags
// below, every one of which either sizes the run as the other server's is
// sized (threads, KV capacity, slots for the requests in flight) or makes
// both do the same work. Anything else a user would tune goes through
// -serve-arg and -llama-arg, into rows of their own (settings.sides).
//
// Left at their defaults, on purpose: the KV cache dtype (serve's f32,
// llama-server's f16), flash attention (llama-server's auto), serve's
// bf16 products (auto: on where the CPU has AVX512-BF16), and Gemma-3's
// sliding-window cache (llama-server keeps only the window unless
// --swa-full; serve keeps every position). None of them changes which
// tokens a request is asked for, only how each server computes them.

// pinnedFlag is one flag a default row gets, and why.
type pinnedFlag struct {
	flag []string // the flag and its value, as passed
	why  string
}

// flagsOf is the command-line arguments of fs, in order.
func flagsOf(fs []pinnedFlag) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.flag...)
	}
	return out
}

// serveDefaults are the flags serve's default row gets after -model; its
// threads come as GOMAXPROCS in the environment.
func (s *settings) serveDefaults() []pinnedFlag {
	return []pinnedFlag{
		{[]string{"-prefix-caching"}, "llama-server reuses a slot's cached prompt prefix as shipped, and serve's default is the no-cache baseline; (a) cached and the shared-prefix run measure that reuse"},
		{[]string{"-blocks", strconv.Itoa(s.ctx / 16)}, fmt.Sprintf("context: %d tokens of KV pool in serve's default blocks of 16, llama-server's -c", s.ctx)},
	}
}

// llamaDefaults are the flags llama-server's default row gets after -m.
func (s *settings) llamaDefaults() []pinnedFlag {
	t := strconv.Itoa(s.threads)
	return []pinnedFlag{
		{[]string{"-t", t, "-tb", t}, "threads, for decode and prompt batches, as serve's GOMAXPROCS"},
		{[]string{"-c", strconv.Itoa(s.ctx), "-kvu"}, "context: one KV cache of that many tokens shared by the slots, as serve's pool is (without -kvu each slot would get 1/-np of it)"},
		{[]string{"-np", strconv.Itoa(s.slots)}, "concurrency: a slot per request in flight, as serve admits every request it is sent"},
	}
}

// describeDefaults is the list the markdown carries under the command
// lines: each default flag and why it is there.
func (s *settings) describeDefaults() string {
	var b strings.Builder
	line := func(who string, fs []pinnedFlag) {
		var parts []string
		for _, f := range fs {
			parts = append(parts, fmt.Sprintf("`%s` (%s)", strings.Join(f.flag, " "), f.why))
		}
		fmt.Fprintf(&b, "- %s as shipped, but for: %s.\n", who, strings.Join(parts, "; "))
	}
	b.WriteString("Default rows: each server with its own defaults.\n\n")
	threads := pinnedFlag{[]string{"GOMAXPROCS=" + strconv.Itoa(s.threads)}, "threads, as llama-server's -t"}
	line("serve", append([]pinnedFlag{threads}, s.serveDefaults()...))
	if s.llamaServer != "" {
		line("llama-server", s.llamaDefaults())
	}
	b.WriteString("- left at each server's default: the KV cache dtype, flash attention, serve's bf16 products (-bf16-dot auto), llama-server's sliding-window cache (no --swa-full).\n")
	if len(s.serveArgs) > 0 || len(s.llamaArgs) > 0 {
		b.WriteString("- a row whose label has arguments after the server's name is tuned: the default flags, then those arguments (-serve-arg, -llama-arg).\n")
	}
	return b.String()
}
