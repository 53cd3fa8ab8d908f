// Command docnumbers regenerates every deterministic block of the docs
// (see package docnumbers); `make docs-numbers` runs it from the
// repository root. With -short it regenerates only the blocks the docs
// test checks.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"kvlab/internal/docnumbers"
)

func main() {
	short := flag.Bool("short", false, "only the small blocks the docs test checks")
	only := flag.String("only", "", "only the block with this name")
	flag.Parse()
	if err := run(*short, *only); err != nil {
		fmt.Fprintln(os.Stderr, "docnumbers:", err)
		os.Exit(1)
	}
}

func run(short bool, only string) error {
	var blocks []docnumbers.Block
	for _, b := range docnumbers.Blocks {
		if (short && !b.Short) || (only != "" && b.Name != only) {
			continue
		}
		blocks = append(blocks, b)
	}
	if len(blocks) == 0 {
		return fmt.Errorf("no block named %q", only)
	}
	dir, err := os.MkdirTemp("", "docnumbers")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	root, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	gen, err := docnumbers.Build(root, dir, blocks)
	if err != nil {
		return err
	}
	for i, b := range blocks {
		fmt.Fprintf(os.Stderr, "[%d/%d] %s: %s\n", i+1, len(blocks), b.Name, b.Command())
		out, err := gen(b)
		if err != nil {
			return err
		}
		if err := docnumbers.Update(b.Doc, b.Name, out); err != nil {
			return err
		}
	}
	return nil
}
