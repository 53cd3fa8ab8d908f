package cli

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"kvlab/common/server"
)

// llamaServerFlags are the serve flags a llama-server user passes: the
// ones this server implements (model aliases, API keys, the /metrics and
// /slots switches, CORS; --cache-ram is the host-memory tier of tiers.go,
// and -cram its short form here), the ones that name what serve already does
// (--ubatch-size is -max-batch-tokens, --swa-full the default), and the
// ones it cannot honour, refused at start with the reason rather than
// accepted and ignored.
type llamaServerFlags struct {
	alias        string
	tags         string
	strictModel  bool
	apiKey       string
	apiKeyFile   string
	metrics      bool
	slots        bool
	noSlots      bool
	ui, noUI     bool
	swaFull      bool
	contextShift bool
	noCtxShift   bool
	cors         server.CORS
	corsCreds    bool
	noCorsCreds  bool

	names []string // -alias's, once checked
	keys  []string // -api-key's and -api-key-file's
}

func (f *llamaServerFlags) register(fs *flag.FlagSet, rf *runtimeFlags) {
	fs.StringVar(&f.alias, "alias", "", "llama-server's --alias: the model's names, comma-separated; /v1/models lists them all as its aliases, the first in sorted order as its id (instead of -served-model-name), as llama-server does")
	fs.StringVar(&f.tags, "tags", "", "llama-server's --tags: the model's tags, comma-separated, listed by /v1/models (informational)")
	fs.StringVar(&f.alias, "a", "", "short for -alias")
	fs.BoolVar(&f.strictModel, "strict-model-name", false, "refuse with 404 model_not_found a request whose \"model\" is not one of the served names (vLLM's behaviour); off: any name is served, as llama-server does")
	fs.StringVar(&f.apiKey, "api-key", "", "llama-server's --api-key: keys, comma-separated; every endpoint but /health and /v1/health then needs one (Authorization: Bearer <key>, or X-Api-Key), else 401")
	fs.StringVar(&f.apiKeyFile, "api-key-file", "", "a file of API keys, one a line (blank lines skipped), added to -api-key's")
	fs.BoolVar(&f.metrics, "metrics", true, "serve GET /metrics; false answers it with llama-server's 501, as llama-server without --metrics")
	fs.BoolVar(&f.slots, "slots", true, "serve GET /slots (llama-server's --slots)")
	fs.BoolVar(&f.noSlots, "no-slots", false, "answer GET /slots with llama-server's 501 (its --no-slots)")
	for _, name := range []string{"ui", "webui"} { // llama-server's two names
		fs.BoolVar(&f.ui, name, true, "serve the home page at GET / (the server, its model and its prefix cache's hit rate; there is no chat UI); false: a 404, as llama-server's --no-ui")
		fs.BoolVar(&f.noUI, "no-"+name, false, "answer GET / with a 404 (llama-server's --no-ui)")
	}
	fs.StringVar(&f.cors.Origins, "cors-origins", "*", "origins CORS allows: * (any: the request's Origin is echoed while credentials are allowed), localhost (only an Origin on localhost, 127.0.0.1 or ::1), or a list sent as it is (llama-server's flag)")
	fs.StringVar(&f.cors.Methods, "cors-methods", server.DefaultCORSMethods, "the methods a CORS preflight allows")
	fs.StringVar(&f.cors.Headers, "cors-headers", "*", "the headers a CORS preflight allows")
	fs.BoolVar(&f.corsCreds, "cors-credentials", true, "a CORS preflight allows credentials")
	fs.BoolVar(&f.noCorsCreds, "no-cors-credentials", false, "the same as -cors-credentials=false")
	fs.IntVar(&rf.eng.MaxBatchTokens, "ubatch-size", rf.eng.MaxBatchTokens, "llama-server's physical batch, the most tokens one forward pass takes: the same as -max-batch-tokens")
	fs.IntVar(&rf.eng.MaxBatchTokens, "ub", rf.eng.MaxBatchTokens, "short for -ubatch-size")
	fs.IntVar(&rf.tiers.ramMiB, "cram", 0, "short for -cache-ram")
	fs.BoolVar(&f.swaFull, "swa-full", false, "llama-server's full-size sliding-window KV: accepted, it is serve's default (not with -window-free)")
	fs.BoolVar(&f.contextShift, "context-shift", false, "llama-server's context shift: refused, not supported (a request that reaches the context limit finishes with length)")
	fs.BoolVar(&f.noCtxShift, "no-context-shift", false, "accepted: serve never shifts the context")
}

// check refuses, before anything is loaded, the flags serve cannot
// honour, and reads -alias and the API keys.
func (f *llamaServerFlags) check(rf *runtimeFlags) error {
	switch {
	case f.contextShift:
		return fmt.Errorf("-context-shift is not supported: requests past the context finish with length")
	case f.swaFull && rf.eng.WindowFree:
		return fmt.Errorf("-swa-full and -window-free contradict each other: -swa-full keeps every sliding-window block, -window-free gives them back")
	}
	if f.names = commaSet(f.alias); f.alias != "" && len(f.names) == 0 {
		return fmt.Errorf("-alias %q names no model", f.alias)
	}
	var err error
	f.keys, err = apiKeys(f.apiKey, f.apiKeyFile)
	return err
}

// apply sets what the flags mean in opts, once check has passed; the
// model's id is -alias's first name in sorted order (the caller sets it
// as ModelName).
func (f *llamaServerFlags) apply(opts *server.Options) {
	if len(f.names) > 1 {
		opts.Aliases = f.names[1:]
	}
	opts.StrictModelName = f.strictModel
	opts.Tags = commaSet(f.tags)
	opts.NoMetrics = !f.metrics
	opts.NoSlots = f.noSlots || !f.slots
	opts.NoUI = f.noUI || !f.ui
	opts.APIKeys = f.keys
	opts.CORS = f.cors
	opts.CORS.NoCredentials = !f.corsCreds || f.noCorsCreds
}

// commaSet is a comma-separated list's items, trimmed, without empty or
// repeated ones, sorted: llama-server keeps aliases and tags in a set.
func commaSet(list string) []string {
	var out []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// apiKeys gathers the keys of -api-key and -api-key-file.
func apiKeys(list, file string) ([]string, error) {
	var keys []string
	for _, k := range strings.Split(list, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	if list != "" && len(keys) == 0 {
		return nil, fmt.Errorf("-api-key %q has no key", list)
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("-api-key-file: %w", err)
		}
		n := len(keys)
		for _, k := range strings.Split(string(b), "\n") {
			if k = strings.TrimSpace(k); k != "" {
				keys = append(keys, k)
			}
		}
		if len(keys) == n {
			return nil, fmt.Errorf("-api-key-file %s has no key", file)
		}
	}
	return keys, nil
}
