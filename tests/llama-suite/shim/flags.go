package main

import (
	"regexp"
	"strconv"
	"strings"
)

// shortFlags names llama-server's short flags by their long form.
var shortFlags = map[string]string{
	"-a": "--alias", "-b": "--batch-size", "-c": "--ctx-size", "-cram": "--cache-ram",
	"-ctk": "--cache-type-k", "-ctv": "--cache-type-v", "-fa": "--flash-attn",
	"-hf": "--hf-repo", "-hfr": "--hf-repo", "-hff": "--hf-file", "-kvu": "--kv-unified",
	"-m": "--model", "-mu": "--model-url", "-md": "--model-draft", "-n": "--n-predict",
	"-ngl": "--n-gpu-layers", "-np": "--parallel", "-s": "--seed", "-t": "--threads",
	"-to": "--timeout", "-ub": "--ubatch-size", "-v": "--verbose",
}

// valueFlags are llama-server's flags (long form) that take a value; the
// others the suite passes are switches.
var valueFlags = set("alias", "api-key", "batch-size", "cache-ram", "cache-reuse",
	"cache-type-k", "cache-type-v", "chat-template", "chat-template-file", "cors-origins",
	"ctx-size", "flash-attn", "grp-attn-n", "grp-attn-w", "hf-file", "hf-repo", "host",
	"lora", "mcp-servers-config", "mcp-servers-json", "media-path", "mmproj-url", "model",
	"model-draft", "model-url", "models-dir", "models-max", "models-preset", "n-gpu-layers",
	"n-predict", "parallel", "pooling", "port", "reasoning", "reasoning-format",
	"reasoning-budget", "seed", "sleep-idle-seconds", "slot-save-path", "spec-draft-n-max",
	"spec-draft-n-min", "spec-type", "tags", "temp", "threads", "timeout", "tools",
	"tools-runtime", "ubatch-size")

// modelFlags choose or download the model: serve ignores them (its built-in
// model), the control has them replaced by -m with the exported GGUF.
var modelFlags = set("hf-file", "hf-repo", "mmproj-url", "model", "model-draft",
	"model-url", "models-dir", "models-max", "models-preset", "no-mmproj", "offline")

// renamed maps a llama-server flag to serve's flag of the same meaning when
// the names differ; serve's own name, when it has the llama-server one, wins.
// --batch-size is not serve's -max-batch-tokens: llama-server's logical
// batch bounds a step's tokens but not how many sequences run, and serve's
// budget bounds both (-max-running, -max-n), so the suite's -b 16 would
// refuse its defaults.
var renamed = map[string][]string{
	"alias":        {"served-model-name"},
	"cache-type-k": {"ctk"},
	"cache-type-v": {"ctv"},
	"ctx-size":     {"max-context"},
}

// alwaysServe are the flags every serve the shim starts gets: the prefix
// cache, which --slot-save-path and the slots' prompt reuse need.
var alwaysServe = []string{"-prefix-caching"}

// serveFlag is one flag of `serve -h`: its name and the type word Go's
// flag package prints for it ("" for a switch).
type serveFlag struct {
	typ string
}

var helpLine = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9_.-]*)(?: (\S+))?`)

// parseHelp reads the flags of Go's flag usage text (`serve -h`).
func parseHelp(help string) map[string]serveFlag {
	flags := map[string]serveFlag{}
	for _, line := range strings.Split(help, "\n") {
		if m := helpLine.FindStringSubmatch(line); m != nil {
			flags[m[1]] = serveFlag{typ: m[2]}
		}
	}
	return flags
}

// llamaArg is one llama-server flag of the command line, in long form
// without its dashes, with its value if it takes one.
type llamaArg struct {
	name     string
	value    string
	hasValue bool
	orig     []string // as written, for the log and the control
}

// splitArgs cuts llama-server's command line into flags and their values.
func splitArgs(args []string) []llamaArg {
	var out []llamaArg
	for i := 0; i < len(args); i++ {
		a := args[i]
		long := a
		if l, ok := shortFlags[a]; ok {
			long = l
		}
		name, value, inline := strings.Cut(strings.TrimLeft(long, "-"), "=")
		arg := llamaArg{name: name, orig: []string{a}}
		switch {
		case inline:
			arg.value, arg.hasValue = value, true
		case valueFlags[name] && i+1 < len(args):
			i++
			arg.value, arg.hasValue = args[i], true
			arg.orig = append(arg.orig, args[i])
		case !valueFlags[name] && !strings.HasPrefix(a, "-"):
			// a stray word: kept as written so the log shows it
		case !valueFlags[name] && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && !knownSwitch(name):
			// an unknown flag followed by a word: take the word as its value
			i++
			arg.value, arg.hasValue = args[i], true
			arg.orig = append(arg.orig, args[i])
		}
		out = append(out, arg)
	}
	return out
}

// knownSwitch reports the llama-server switches the suite passes, so a
// following flag's value is never taken for theirs.
func knownSwitch(name string) bool {
	return switches[name]
}

var switches = set("cont-batching", "context-shift", "embedding", "jinja", "kv-unified",
	"metrics", "no-cache-idle-slots", "no-context-shift", "no-jinja", "no-mmproj",
	"no-models-autoload", "no-slots", "no-ui", "no-webui", "offline", "reranking",
	"slots", "swa-full", "ui-mcp-proxy", "verbose", "backend_sampling")

// toServe translates llama-server's command line into serve's: the
// arguments after the runnable's name, and the flags it could not map.
func toServe(args []string, serve map[string]serveFlag) (argv, unmapped []string) {
	argv = append([]string{"serve"}, alwaysServe...)
	split := splitArgs(args)
	perSlot := slotContext(split)
	metrics := false
	for _, a := range split {
		if modelFlags[a.name] {
			continue
		}
		if a.name == "ctx-size" && perSlot != "" {
			a.value = perSlot
		}
		metrics = metrics || a.name == "metrics"
		mapped, ok := serveArg(a, serve)
		if !ok {
			unmapped = append(unmapped, strings.Join(a.orig, " "))
			continue
		}
		argv = append(argv, mapped...)
	}
	// llama-server serves /metrics only with --metrics; serve's is on by
	// default, so the suite's command line without it turns it off.
	if _, ok := serve["metrics"]; ok && !metrics {
		argv = append(argv, "-metrics=false")
	}
	return argv, unmapped
}

// slotContext is the context of one slot for llama-server's command line,
// as a number, or "" when it is --ctx-size itself: llama-server splits
// --ctx-size evenly across an explicit --parallel N unless --kv-unified
// (an unset --parallel means 4 slots over one unified cache), while serve's
// -max-context is the context of every request.
func slotContext(args []llamaArg) string {
	ctx, slots, unified := 0, 1, false
	for _, a := range args {
		switch a.name {
		case "ctx-size":
			ctx, _ = strconv.Atoi(a.value)
		case "parallel":
			slots, _ = strconv.Atoi(a.value)
		case "kv-unified":
			unified = true
		}
	}
	if ctx <= 0 || slots <= 1 || unified {
		return ""
	}
	return strconv.Itoa(ctx / slots)
}

// serveArg is serve's form of one llama-server flag, if serve has one.
func serveArg(a llamaArg, serve map[string]serveFlag) ([]string, bool) {
	for _, name := range append([]string{a.name}, renamed[a.name]...) {
		f, ok := serve[name]
		if !ok {
			continue
		}
		switch {
		case f.typ == "" && !a.hasValue:
			return []string{"-" + name}, true
		case f.typ == "" && a.hasValue:
			return []string{"-" + name + "=" + a.value}, true
		case a.hasValue:
			return []string{"-" + name, convert(a.value, f.typ)}, true
		}
	}
	// --no-X: serve's switch -X turned off.
	if x, ok := strings.CutPrefix(a.name, "no-"); ok && !a.hasValue {
		if f, ok := serve[x]; ok && f.typ == "" {
			return []string{"-" + x + "=false"}, true
		}
	}
	return nil, false
}

// convert writes llama-server's value in the form of serve's flag type:
// llama-server's durations are whole seconds, serve's Go durations.
func convert(value, typ string) string {
	if typ == "duration" {
		if _, err := strconv.Atoi(value); err == nil {
			return value + "s"
		}
	}
	return value
}

// toControl is the real llama-server's command line: the suite's flags
// less its model flags, and -m with the GGUF serve's model was exported to.
func toControl(args []string, gguf string) []string {
	var argv []string
	for _, a := range splitArgs(args) {
		if modelFlags[a.name] {
			continue
		}
		argv = append(argv, a.orig...)
	}
	return append(argv, "-m", gguf)
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
