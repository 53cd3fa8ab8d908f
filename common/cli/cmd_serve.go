package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"kvlab/common/engine"
	"kvlab/common/httpx"
	"kvlab/common/kvcache"
	"kvlab/common/kvcache/ghost"
	"kvlab/common/kvevents"
	"kvlab/common/server"
	"kvlab/common/tokenizer"
)

func runServe(v Variant, args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Serve(ctx, v, args, nil, stderr)
}

// serveBuilt, when set (by tests), is handed the engine server Serve just
// built, before it serves: a test reaches the engine through its Do.
var serveBuilt func(*engine.Server)

// Serve runs the HTTP server the args describe until ctx is done (the
// serve command cancels it on SIGINT or SIGTERM), then shuts down
// gracefully: it stops accepting connections, lets requests in flight
// finish for up to -shutdown-timeout, cancels the rest, and checks that
// every KV block is accounted for. ready, if not nil, is called with the
// listening address once the server accepts connections.
func Serve(ctx context.Context, v Variant, args []string, ready func(addr string), log io.Writer) error {
	flags := newFlagSet(v, "serve", log)
	var rf runtimeFlags
	// The engine flags of bench, with the cache off unless asked for: a
	// server without -prefix-caching is the phase-7 baseline.
	rf.register(flags, Variant{Name: v.Name})
	var lf llamaServerFlags // serve_llama_flags.go
	lf.register(flags, &rf)
	rf.tiers.register(flags) // -cache-ram, llama-server's, and -cache-disk (tiers.go)
	host := flags.String("host", "127.0.0.1", "address to listen on")
	port := flags.Int("port", 8000, "port to listen on (0: any free port)")
	name := flags.String("served-model-name", "", "model id in /v1/models and responses (default: the model directory's name, kvlab-builtin for the built-in model)")
	maxQueue := flags.Int("max-queue", 256, "refuse requests with 429 while this many wait for admission (0: no limit)")
	maxN := flags.Int("max-n", server.DefaultMaxN, "most samples (n) one request may ask for; at most half of -max-running, so one request never holds every running slot")
	maxUnread := flags.Int("max-unread", engine.DefaultMaxUnread, "cancel a request whose client has this many events (tokens) unread, instead of letting it hold the engine's memory")
	writeTimeout := flags.Duration("write-timeout", server.DefaultWriteTimeout, "give up on a client when one write to it does not go through within this time")
	maxBody := flags.Int64("max-body-bytes", 8<<20, "largest request body accepted (413 beyond it)")
	maxText := flags.Int("max-text-requests", server.DefaultMaxTextRequests, "most /tokenize and /detokenize requests served at once; one more is refused with 503 and Retry-After")
	limits := httpx.DefaultLimits() // -header-timeout, -timeout, -idle-timeout, -max-conns
	limits.Register(flags)
	grace := flags.Duration("shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long requests in flight may run before they are cancelled")
	ghosts := flags.Bool("ghosts", false, "with -prefix-caching, run rival eviction policies (LRU, LFU, SLRU, ARC, TensorRT-LLM-style priority) as metadata-only ghost caches on the same traffic and report what each would have hit on /metrics (kvlab:ghost_*)")
	debugCache := flags.Bool("debug-cache", false, "serve the prefix cache drawn live at GET /debug/cache, as JSON at /debug/cache.json and as server-sent events at /debug/cache/events (docs/debug_cache.md)")
	debugMaxNodes := flags.Int("debug-cache-max-nodes", server.DefaultDebugCacheMaxNodes, "with -debug-cache, the most cache nodes one view carries (the walk runs on the engine's loop); the rest are counted as left out")
	tailBlocks := flags.Int("tail-blocks", DefaultTailBlocks, "with -prefix-caching, keep the partial last blocks of up to this many ended requests, so that a prompt repeating or continuing one computes only its new tokens, not every token after its last whole block (0: whole blocks only, the rule of each cache design; docs/phase08.md)")
	verifyHits := flags.Int("verify-hits", 0, "with -prefix-caching, recompute one in N prefix-cache hits from scratch off the engine's goroutine and compare the KV bit for bit; a block that differs is logged, counted (kvlab:prefix_cache_verify_failures_total) and forgotten (0: off)")
	kvEvents := flags.Bool("kv-events", false, "with -prefix-caching, publish what enters and leaves the prefix cache on GET /v1/kv_events (docs/kv_events.md)")
	kvEndpoint := flags.String("kv-events-endpoint", "", "with -prefix-caching, also publish the events as vLLM does, on a ZeroMQ PUB socket: tcp://host:port connects to a subscriber (llm-d's indexer), tcp://*:port binds")
	kvTopic := flags.String("kv-events-topic", "", "ZeroMQ topic (default kv@<-kv-events-advertise>@<served model name>, the form llm-d's indexer parses)")
	kvAdvertise := flags.String("kv-events-advertise", "", "host:port that the default topic names this server by, the address a scheduler reaches it at (default: the listen address; needed when -host is 0.0.0.0 or ::)")
	kvReplay := flags.String("kv-events-replay-endpoint", "", "with -kv-events-endpoint, bind a ZeroMQ ROUTER socket here (e.g. tcp://*:5558) that answers vLLM's replay requests")
	kvBufferSteps := flags.Int("kv-events-buffer-steps", 10000, "how many recent batches the replay socket keeps (vLLM's buffer_steps)")
	kvBufferBytes := flags.Int("kv-events-buffer-bytes", kvevents.DefaultBufferBytes, "at most this many payload bytes in the replay buffer (the oldest batches go first)")
	kvHWM := flags.Int("kv-events-hwm", kvevents.DefaultHWM, "ZeroMQ batches that may wait for one subscriber; more are dropped for it and counted (libzmq's ZMQ_SNDHWM)")
	kvWriteTimeout := flags.Duration("kv-events-write-timeout", kvevents.DefaultWriteTimeout, "a ZeroMQ subscriber or replay client that takes nothing for this long is disconnected")
	kvMaxSubs := flags.Int("kv-events-max-subscribers", kvevents.DefaultMaxSubscribers, "ZeroMQ subscribers connected at once; one more is refused")
	kvFormat := flags.String("kv-events-format", "array", "ZeroMQ payload layout: array (positional events, read by llm-d from 0.5 on) or map (vLLM since its map encoding, read by llm-d from 0.9 on)")
	kvIntHashes := flags.Bool("kv-events-int-hashes", false, "publish block hashes as vLLM's 64-bit integers instead of 32 bytes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES)")
	hashSeed := flags.String("kv-hash-seed", kvevents.DefaultHashSeed, "the seed of the block-hash chains; a vLLM replica with PYTHONHASHSEED set to it computes the same hashes")
	hashAlgo := kvevents.SHA256CBOR
	flags.TextVar(&hashAlgo, "prefix-caching-hash-algo", kvevents.SHA256CBOR, "the block-hash algorithm, as vLLM's flag of this name: sha256, sha256_cbor, xxhash or xxhash_cbor; a vLLM replica shares our hashes when it runs the same one with PYTHONHASHSEED set to -kv-hash-seed (docs/kv_events.md)")
	loraName := flags.String("lora-name", "", "name every block as vLLM names the blocks of requests for the LoRA adapter of this name (its lora_name, an extra key of every block); no adapter is applied, only the hashes change")
	parallel := flags.Int("parallel", 1, "llama-server's slots (-np): named handles on the blocks of each slot's last prompt, for id_slot and /slots; not a limit on concurrent requests")
	flags.IntVar(parallel, "np", 1, "short for -parallel")
	temp := flags.Float64("temp", 0.8, "temperature of a request that names none (llama-server's flag; below 0: greedy); the /v1 endpoints keep OpenAI's 1 unless this flag is given")
	seed := flags.Int64("seed", -1, "sampling seed of a request that names none (llama-server's flag; -1: a random seed per request)")
	nPredict := flags.Int("n-predict", -1, "tokens to generate for a request that names no length (llama-server's flag; -1: until the end of the sequence or the context, 0: evaluate the prompt only); /v1/completions keeps OpenAI's 16 unless this flag is given")
	flags.IntVar(nPredict, "n", -1, "short for -n-predict")
	slotSavePath := flags.String("slot-save-path", "", "with -prefix-caching, the directory of POST /slots/{id}?action=save|restore files (llama-server's flag)")
	slotSaveMax := flags.Int64("slot-save-max-bytes", server.DefaultSlotSaveMaxBytes, "with -slot-save-path, the most bytes all the files there may take: a slot save past it is refused with 507 (0: no limit)")
	var chatTmpl chatTemplateFlags // -chat-template, -chat-template-file, -jinja, -reasoning, … (chattemplate.go)
	chatTmpl.register(flags)
	cacheDir := flags.String("cache-dir", "", "with -prefix-caching, restore the prefix cache from this directory on start and save it there on shutdown and on POST /cache/save")
	var prefixCaching *bool
	if v.PrefixCache != nil {
		rf.registerCacheFlags(flags, v)
		prefixCaching = flags.Bool("prefix-caching", false, "reuse the KV of shared prompt prefixes with this runnable's cache (off: the phase-7 baseline)")
		flags.StringVar(&rf.admission, "admission", "cost-aware", "with -prefix-caching, how admission charges a prompt: conservative or cost-aware")
	}
	if err := parse(flags, args); err != nil {
		return err
	}
	rf.noCache = prefixCaching == nil || !*prefixCaching
	if err := lf.check(&rf); err != nil {
		return err
	}
	if err := rf.tiers.check(!rf.noCache, "-prefix-caching"); err != nil {
		return err
	}
	if len(lf.names) > 0 {
		*name = lf.names[0] // -alias names the model as -served-model-name does
	}
	if *maxQueue < 0 || *maxBody <= 0 || *port < 0 || *port > 65535 {
		return fmt.Errorf("-max-queue must be ≥ 0, -max-body-bytes > 0 and -port in [0, 65535]")
	}
	if *maxUnread <= 0 || *writeTimeout <= 0 {
		return fmt.Errorf("-max-unread and -write-timeout must be positive")
	}
	if *maxText < 1 {
		return fmt.Errorf("-max-text-requests must be at least 1, have %d", *maxText)
	}
	if err := limits.Validate(); err != nil {
		return err
	}
	if math.IsNaN(*temp) || math.IsInf(*temp, 0) || *seed < -1 || *nPredict < -1 {
		return fmt.Errorf("-temp must be a finite number, -seed ≥ -1 (-1: random) and -n-predict ≥ -1 (-1: no limit)")
	}
	if *parallel < 1 || *parallel > 1024 {
		return fmt.Errorf("-parallel must be in [1, 1024], have %d", *parallel)
	}
	if *slotSaveMax < 0 {
		return fmt.Errorf("-slot-save-max-bytes must be ≥ 0 (0: no limit), have %d", *slotSaveMax)
	}
	if *slotSavePath != "" && rf.noCache {
		return fmt.Errorf("-slot-save-path needs -prefix-caching: without a prefix cache a request's KV is freed when it ends, and a slot has nothing to save")
	}
	publishEvents := *kvEvents || *kvEndpoint != ""
	if (publishEvents || *cacheDir != "") && rf.noCache {
		return fmt.Errorf("-kv-events, -kv-events-endpoint and -cache-dir need -prefix-caching: without a prefix cache nothing is cached")
	}
	if *kvFormat != "array" && *kvFormat != "map" {
		return fmt.Errorf("-kv-events-format is array or map, not %q", *kvFormat)
	}
	if (*kvReplay != "" || *kvAdvertise != "") && *kvEndpoint == "" {
		return fmt.Errorf("-kv-events-replay-endpoint and -kv-events-advertise need -kv-events-endpoint")
	}
	if *kvBufferSteps < 0 {
		return fmt.Errorf("-kv-events-buffer-steps must be ≥ 0, have %d", *kvBufferSteps)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"-kv-events-buffer-bytes", *kvBufferBytes}, {"-kv-events-hwm", *kvHWM}, {"-kv-events-max-subscribers", *kvMaxSubs}} {
		if f.v <= 0 {
			return fmt.Errorf("%s must be > 0, have %d", f.name, f.v)
		}
	}
	if *debugMaxNodes < 1 {
		return fmt.Errorf("-debug-cache-max-nodes must be at least 1, have %d", *debugMaxNodes)
	}
	if *kvWriteTimeout <= 0 {
		return fmt.Errorf("-kv-events-write-timeout must be > 0, have %v", *kvWriteTimeout)
	}
	stopProfile, err := rf.startProfiles()
	if err != nil {
		return err
	}
	defer stopProfile()

	cfg, err := rf.engineConfig(v)
	if err != nil {
		return err
	}
	var board *ghost.Board
	if *ghosts {
		if cfg.PrefixCache == nil {
			return errors.New("-ghosts runs rival policies beside the prefix cache: it needs -prefix-caching")
		}
		cfg.PrefixCache, board = ghost.Wrap(cfg.PrefixCache, ghost.Config{Policies: ghost.Standard(nil)})
	}
	if *tailBlocks < 0 || (*tailBlocks > 0 && cfg.PrefixCache == nil && flagGiven(flags, "tail-blocks")) {
		return fmt.Errorf("-tail-blocks continues prefix-cache matches: it needs -prefix-caching and N ≥ 0, have %d", *tailBlocks)
	}
	if cfg.PrefixCache != nil {
		cfg.TailBlocks = *tailBlocks
	}
	if *verifyHits < 0 || (*verifyHits > 0 && cfg.PrefixCache == nil) {
		return fmt.Errorf("-verify-hits checks prefix-cache hits: it needs -prefix-caching and N ≥ 0, have %d", *verifyHits)
	}
	cfg.VerifyHits, cfg.VerifyLog = *verifyHits, log
	// The fairness rule: one request's samples may hold at most half of
	// the running slots, so other requests are admitted beside it.
	if half := max(1, cfg.RunningSlots()/2); *maxN < 1 || *maxN > min(half, engine.MaxSamples) {
		return fmt.Errorf("-max-n must be in [1, %d]: at most half of the %d running slots (-max-running, -max-batch-tokens), have %d", min(half, engine.MaxSamples), cfg.RunningSlots(), *maxN)
	}
	dir, err := rf.dir()
	if err != nil {
		return err
	}
	m, err := rf.loadModel()
	if err != nil {
		return err
	}
	defer m.Close()
	tok, err := tokenizer.Load(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(log, "%s serve: %s has no tokenizer.json; prompts must be token ids\n", v.Name, dir)
		tok = nil
	case err != nil:
		return err
	}
	if err := chatTmpl.apply(tok); err != nil {
		return err
	}
	// The tiers name blocks as the observer below does, so a disk tier's
	// files are found again by a server started with the same flags.
	hasher := kvevents.NewHasher(hashAlgo, *hashSeed, *loraName)
	tiers, err := rf.tiers.open(&cfg, dir, &m.Config, hasher, log, v.Name+" serve")
	if err != nil {
		return err
	}
	defer tiers.release()
	e, err := engine.New(m, cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	es := engine.NewServerWith(e, engine.Limits{MaxUnread: *maxUnread, MaxWaiting: *maxQueue})
	if serveBuilt != nil {
		serveBuilt(es)
	}
	if *name == "" {
		*name = filepath.Base(dir)
		if rf.modelDir == "" {
			*name = "kvlab-builtin"
		}
	}
	opts := server.Options{ModelName: *name, Tokenizer: tok, MaxN: *maxN, WriteTimeout: *writeTimeout, MaxBodyBytes: *maxBody, PrefixCaching: cfg.PrefixCache != nil,
		Slots: *parallel, SlotSavePath: *slotSavePath, ModelPath: dir, ModelInfo: modelInfo(m.Config, dir, tok)}
	opts.MaxTextRequests, opts.Log = *maxText, log
	opts.Verbose = chatTmpl.verbose
	lf.apply(&opts)
	opts.Defaults = sampleDefaults(flags, *temp, *seed, *nPredict)
	if board != nil {
		opts.Ghosts = board.Report
	}
	var obs *kvcache.Observer
	if publishEvents || *cacheDir != "" || *slotSavePath != "" || tiers != nil {
		obs = e.Pool().ObserveWith(hasher)
	}
	if err := tiers.verify(e.Pool()); err != nil {
		return err
	}
	if *cacheDir != "" {
		if opts.CacheFile, err = openCacheFile(*cacheDir, dir, e.Pool(), obs, *hashSeed); err != nil {
			return err
		}
		if err := removeStaleTemps(log, v.Name, *cacheDir); err != nil {
			return fmt.Errorf("-cache-dir: %w", err)
		}
		n, err := opts.CacheFile.Restore()
		switch {
		case errors.Is(err, server.ErrNoCacheFile):
			fmt.Fprintf(log, "%s serve: no saved cache in %s; starting with an empty cache\n", v.Name, *cacheDir)
		case err != nil && n == 0:
			// Kept under another name, so the shutdown save writes a
			// fresh file instead of wiping one another start may read.
			aside, aerr := opts.CacheFile.SetAside(time.Now())
			if aerr != nil {
				return fmt.Errorf("-cache-dir: %v; and it cannot be moved aside, so a save would overwrite it: %w", err, aerr)
			}
			fmt.Fprintf(log, "%s serve: warning: %v; kept as %s; starting with an empty cache\n", v.Name, err, aside)
		case err != nil:
			fmt.Fprintf(log, "%s serve: cache restored in part: %v\n", v.Name, err)
		default:
			fmt.Fprintf(log, "%s serve: restored %d cached KV blocks from %s\n", v.Name, n, opts.CacheFile.Path)
		}
	}
	if *slotSavePath != "" {
		if opts.SlotKV = opts.CacheFile; opts.SlotKV == nil {
			if opts.SlotKV, err = openCacheFile("", dir, e.Pool(), obs, *hashSeed); err != nil {
				return err
			}
		}
		opts.SlotKV.SlotDirMaxBytes = *slotSaveMax
		if err := os.MkdirAll(*slotSavePath, 0o755); err != nil {
			return fmt.Errorf("-slot-save-path: %w", err)
		}
		if err := removeStaleTemps(log, v.Name, *slotSavePath); err != nil {
			return fmt.Errorf("-slot-save-path: %w", err)
		}
	}
	if publishEvents {
		opts.KVEvents = server.NewKVEvents(obs)
	}
	if *debugCache {
		opts.DebugCache = &server.DebugCache{MaxNodes: *debugMaxNodes}
	}
	h := server.New(es, opts)

	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	engineCtx, stopEngine := context.WithCancel(context.Background())
	engineDone := make(chan struct{})
	go func() { es.Run(engineCtx); close(engineDone) }()
	// Per-write deadlines are the handler's (server.Options.WriteTimeout):
	// http.Server's WriteTimeout would cut every stream at a fixed length.
	// The body deadline, idle timeout and connection cap are httpx's.
	srv := limits.Server(h)
	eventsCtx, stopEvents := context.WithCancel(context.Background())
	eventsDone := make(chan struct{})
	var pub *kvevents.Publisher
	defer func() {
		stopEvents()
		<-eventsDone // the last events go out before the socket closes
		if pub != nil {
			pub.Close()
		}
	}()
	if opts.DebugCache != nil {
		srv.RegisterOnShutdown(opts.DebugCache.Close) // open pages must not hold the shutdown up
	}
	if opts.KVEvents != nil {
		srv.RegisterOnShutdown(opts.KVEvents.Close) // open streams must not hold the shutdown up
		if *kvEndpoint != "" {
			topic := *kvTopic
			if topic == "" {
				topic, err = server.KVEventsTopic(*kvAdvertise, ln.Addr().String(), *name)
			}
			if err == nil {
				pub, err = kvevents.NewPublisher(kvevents.PublisherOptions{
					Endpoint: *kvEndpoint, Topic: topic,
					Encoding:       kvevents.Encoding{MapEvents: *kvFormat == "map", IntHashes: *kvIntHashes, HashAlgo: hashAlgo, LoRAName: *loraName},
					ReplayEndpoint: *kvReplay, BufferSteps: *kvBufferSteps, BufferBytes: *kvBufferBytes,
					HWM: *kvHWM, WriteTimeout: *kvWriteTimeout, MaxSubscribers: *kvMaxSubs,
				})
			}
			if err != nil {
				close(eventsDone)
				ln.Close()
				stopEngine()
				<-engineDone
				return err
			}
			opts.KVEvents.AddPublisher(pub, func(format string, args ...any) {
				fmt.Fprintf(log, "%s serve: %s\n", v.Name, fmt.Sprintf(format, args...))
			})
			where := *kvEndpoint
			if a := pub.Addr(); a != "" {
				where += " (bound " + a + ")"
			}
			fmt.Fprintf(log, "%s serve: KV events on %s, topic %q\n", v.Name, where, topic)
			if a := pub.ReplayAddr(); a != "" {
				fmt.Fprintf(log, "%s serve: KV event replay on %s (bound %s), the last %d batches, at most %d bytes\n", v.Name, *kvReplay, a, *kvBufferSteps, *kvBufferBytes)
			}
		}
		go func() { opts.KVEvents.Run(eventsCtx); close(eventsDone) }()
	} else if obs != nil {
		// An observer no one reads (for -cache-dir, the slots, the tiers)
		// still queues every event: drop them as they come, or the queue
		// grows for as long as the server runs.
		go func() { discardEvents(eventsCtx, obs); close(eventsDone) }()
	} else {
		close(eventsDone)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(limits.Listen(ln)) }()

	cache := "off"
	if cfg.PrefixCache != nil {
		cache = "on"
	}
	rf.weights.report(log)
	fmt.Fprintf(log, "%s serve: listening on http://%s (model %q, prefix caching %s, %d KV blocks of %d tokens)\n",
		v.Name, ln.Addr(), *name, cache, cfg.NumBlocks, cfg.BlockSize)
	if ready != nil {
		ready(ln.Addr().String())
	}

	select {
	case err := <-served:
		stopEngine()
		<-engineDone
		return err
	case <-ctx.Done():
	}
	fmt.Fprintf(log, "%s serve: shutting down (requests in flight have %v to finish)\n", v.Name, *grace)
	graceCtx, cancel := context.WithTimeout(context.Background(), *grace)
	err = srv.Shutdown(graceCtx)
	cancel()
	// Stopping the loop cancels whatever is still running; its handlers
	// then finish at once.
	stopEngine()
	<-engineDone
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.Shutdown(closeCtx)
		cancel()
		srv.Close()
	}
	var saveErr error // the shutdown's own error, after the audit's
	if opts.CacheFile != nil {
		if n, err := opts.CacheFile.Save(); err != nil {
			saveErr = fmt.Errorf("saving the cache: %w", err)
			fmt.Fprintf(log, "%s serve: %v\n", v.Name, saveErr)
		} else {
			fmt.Fprintf(log, "%s serve: saved %d cached KV blocks to %s\n", v.Name, n, opts.CacheFile.Path)
		}
	}
	// After the engine stopped, before the audit, which checks the tiers'
	// books too: a disk tier keeps the cache for the next start.
	if err := tiers.shutdown(e.Pool()); err != nil {
		fmt.Fprintf(log, "%s serve: %v\n", v.Name, err)
		saveErr = errors.Join(saveErr, err)
	}
	if err := e.Pool().Audit().Err(); err != nil {
		return fmt.Errorf("after shutdown: %w", err)
	}
	if live := e.Pool().Live(); live != 0 {
		return fmt.Errorf("after shutdown: %d sequences still hold KV blocks", live)
	}
	a := e.Pool().Allocator()
	fmt.Fprintf(log, "%s serve: stopped; audit clean (%d of %d KV blocks free, the rest held by the prefix cache and %d kept partial blocks)\n", v.Name, a.NumFree(), a.Total(), e.Pool().TailStats().Held)
	return saveErr
}

// discardEvents drops obs's events as they are queued, until ctx is done.
func discardEvents(ctx context.Context, obs *kvcache.Observer) {
	for {
		select {
		case <-obs.Ready():
			obs.Drain(false)
		case <-ctx.Done():
			return
		}
	}
}

// removeStaleTemps removes, and logs, the temporary files a save killed
// before its rename left in dir.
func removeStaleTemps(log io.Writer, name, dir string) error {
	removed, err := server.RemoveStaleTemps(dir)
	for _, f := range removed {
		fmt.Fprintf(log, "%s serve: removed %s, left in %s by a save that did not finish\n", name, f, dir)
	}
	return err
}

// openCacheFile describes the persistent cache of the model in modelDir for
// pool: the file in cacheDir and the identity its KV must match, which
// includes how obs names blocks (its hasher's algorithm and LoRA name).
func openCacheFile(cacheDir, modelDir string, pool *kvcache.Pool, obs *kvcache.Observer, seed string) (*server.CacheFile, error) {
	fp, err := server.ModelFingerprint(modelDir)
	if err != nil {
		return nil, fmt.Errorf("-cache-dir: identifying the model: %w", err)
	}
	var h kvevents.Hasher
	if obs != nil {
		h = obs.Hasher()
	}
	return &server.CacheFile{
		Path:     filepath.Join(cacheDir, server.CacheFileName),
		Identity: cacheIdentity(fp, pool, h), // a disk tier's too (tiers.go)
		Pool:     pool,
		Observer: obs,
		Seed:     seed,
	}, nil
}

// DefaultTailBlocks is serve's -tail-blocks: how many ended requests'
// partial last blocks the pool keeps. A llama-server slot computes only
// the last token of a prompt it ran before; with whole blocks only, serve
// would compute up to a block of them again. A kept block costs nothing
// while the pool has room (it is given back before a cached block is
// evicted), so the bound is only on the store's bookkeeping.
const DefaultTailBlocks = 64

// flagGiven reports whether flag name was on the command line.
func flagGiven(flags *flag.FlagSet, name string) bool {
	given := false
	flags.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// sampleDefaults are -temp, -seed and -n-predict as the server's request
// defaults: only the flags given on the command line, so that an endpoint
// keeps its own default for the others (server.Defaults).
func sampleDefaults(flags *flag.FlagSet, temp float64, seed int64, nPredict int) server.Defaults {
	var d server.Defaults
	flags.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "temp":
			d.Temperature = &temp
		case "seed":
			d.Seed = &seed
		case "n-predict", "n":
			d.NPredict = &nPredict
		}
	})
	return d
}
