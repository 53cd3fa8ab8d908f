package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"kvlab/common/engine"
	"kvlab/common/server"
	"kvlab/common/tokenizer"
)

func runServe(v Variant, args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Serve(ctx, v, args, nil, stderr)
}

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
	host := flags.String("host", "127.0.0.1", "address to listen on")
	port := flags.Int("port", 8000, "port to listen on (0: any free port)")
	name := flags.String("served-model-name", "", "model id in /v1/models and responses (default: the model directory's name, kvlab-builtin for the built-in model)")
	maxQueue := flags.Int("max-queue", 256, "refuse requests with 429 while this many wait for admission (0: no limit)")
	maxBody := flags.Int64("max-body-bytes", 8<<20, "largest request body accepted (413 beyond it)")
	grace := flags.Duration("shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long requests in flight may run before they are cancelled")
	var prefixCaching *bool
	if v.PrefixCache != nil {
		prefixCaching = flags.Bool("prefix-caching", false, "reuse the KV of shared prompt prefixes with this runnable's cache (off: the phase-7 baseline)")
		flags.StringVar(&rf.admission, "admission", "cost-aware", "with -prefix-caching, how admission charges a prompt: conservative or cost-aware")
	}
	if err := parse(flags, args); err != nil {
		return err
	}
	rf.noCache = prefixCaching == nil || !*prefixCaching
	if *maxQueue < 0 || *maxBody <= 0 || *port < 0 || *port > 65535 {
		return fmt.Errorf("-max-queue must be ≥ 0, -max-body-bytes > 0 and -port in [0, 65535]")
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
	e, err := engine.New(m, cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	es := engine.NewServer(e)
	if *name == "" {
		*name = filepath.Base(dir)
		if rf.modelDir == "" {
			*name = "kvlab-builtin"
		}
	}
	h := server.New(es, server.Options{ModelName: *name, Tokenizer: tok, MaxQueue: *maxQueue, MaxBodyBytes: *maxBody, PrefixCaching: cfg.PrefixCache != nil})

	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	engineCtx, stopEngine := context.WithCancel(context.Background())
	engineDone := make(chan struct{})
	go func() { es.Run(engineCtx); close(engineDone) }()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	cache := "off"
	if cfg.PrefixCache != nil {
		cache = "on"
	}
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
	if err := e.Pool().Audit().Err(); err != nil {
		return fmt.Errorf("after shutdown: %w", err)
	}
	if live := e.Pool().Live(); live != 0 {
		return fmt.Errorf("after shutdown: %d sequences still hold KV blocks", live)
	}
	a := e.Pool().Allocator()
	fmt.Fprintf(log, "%s serve: stopped; audit clean (%d of %d KV blocks free, the rest held by the prefix cache)\n", v.Name, a.NumFree(), a.Total())
	return nil
}
