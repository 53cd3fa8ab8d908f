// Command shim is a llama-server lookalike for llama.cpp's own server tests
// (tools/server/tests): the suite starts the binary named by
// LLAMA_SERVER_BIN_PATH with llama-server's flags, and this shim translates
// them and execs the real target in its place, keeping its process id (the
// suite stops a server with SIGTERM to the pid it started).
//
// Two targets, chosen by KVLAB_SHIM_TARGET:
//
//   - serve (the default): KVLAB_SHIM_BIN is a runnable (phase08_prefix);
//     each llama-server flag becomes the serve flag of the same meaning, if
//     `serve -h` lists one. The model flags (--hf-repo, --model, ...) are
//     ignored: serve runs its built-in model. Every other flag that has no
//     serve counterpart is dropped and logged, to stderr and appended to
//     KVLAB_SHIM_LOG, so a test that fails because a flag is missing says so.
//   - llama-server: KVLAB_SHIM_BIN is a real llama-server, the control. The
//     flags pass through unchanged but for the model flags, replaced by
//     -m KVLAB_SHIM_GGUF (serve's built-in model exported by export-gguf),
//     so that the control runs the same model as serve, with no download.
//
// KVLAB_SHIM_DRY_RUN=1 prints the command it would run, one argument a
// line, and the unmapped flags as "unmapped: FLAG", then exits.
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "llama-suite shim:", err)
		os.Exit(2)
	}
}

// run translates args for the target the environment names and execs it,
// or, with KVLAB_SHIM_DRY_RUN=1, writes the command line to stdout.
func run(args []string, stdout io.Writer) error {
	bin := os.Getenv("KVLAB_SHIM_BIN")
	if bin == "" {
		return fmt.Errorf("KVLAB_SHIM_BIN is not set (the serve runnable, or llama-server with KVLAB_SHIM_TARGET=llama-server)")
	}
	var argv, unmapped []string
	switch target := os.Getenv("KVLAB_SHIM_TARGET"); target {
	case "", "serve":
		help, err := exec.Command(bin, "serve", "-h").CombinedOutput()
		if err != nil && len(help) == 0 {
			return fmt.Errorf("%s serve -h: %w", bin, err)
		}
		argv, unmapped = toServe(args, parseHelp(string(help)))
	case "llama-server":
		gguf := os.Getenv("KVLAB_SHIM_GGUF")
		if gguf == "" {
			return fmt.Errorf("KVLAB_SHIM_GGUF is not set (the GGUF the control serves)")
		}
		argv = toControl(args, gguf)
	default:
		return fmt.Errorf("KVLAB_SHIM_TARGET %q: want serve or llama-server", target)
	}
	logUnmapped(unmapped)
	if os.Getenv("KVLAB_SHIM_DRY_RUN") == "1" {
		fmt.Fprintln(stdout, bin)
		for _, a := range argv {
			fmt.Fprintln(stdout, a)
		}
		for _, u := range unmapped {
			fmt.Fprintln(stdout, "unmapped:", u)
		}
		return nil
	}
	return syscall.Exec(bin, append([]string{bin}, argv...), os.Environ())
}

// logUnmapped reports each flag serve has no counterpart for on stderr and
// appends it to KVLAB_SHIM_LOG with the test that started the server
// (pytest's PYTEST_CURRENT_TEST), so the runner can list them.
func logUnmapped(unmapped []string) {
	if len(unmapped) == 0 {
		return
	}
	test := os.Getenv("PYTEST_CURRENT_TEST")
	for _, u := range unmapped {
		fmt.Fprintf(os.Stderr, "llama-suite shim: serve has no flag for %s: dropped\n", u)
	}
	path := os.Getenv("KVLAB_SHIM_LOG")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "llama-suite shim:", err)
		return
	}
	defer f.Close()
	stamp := time.Now().UTC().Format(time.RFC3339)
	for _, u := range unmapped {
		fmt.Fprintf(f, "%s\t%s\t%s\n", stamp, u, test)
	}
}
