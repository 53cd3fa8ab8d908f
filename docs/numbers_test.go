package docs

import (
	"os"
	"path/filepath"
	"testing"

	"kvlab/internal/docnumbers"
)

// TestNumbersMatchTheCode reruns the small generated blocks (the ones that
// take seconds) and requires the docs to quote exactly what the code
// produces now. Every block runs on a virtual clock, so its output does not
// depend on the machine. `make docs-numbers` rewrites every block.
func TestNumbersMatchTheCode(t *testing.T) {
	var short []docnumbers.Block
	for _, b := range docnumbers.Blocks {
		if b.Short {
			short = append(short, b)
		}
	}
	gen, err := docnumbers.Build(root, t.TempDir(), short)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range short {
		doc, err := os.ReadFile(filepath.Join(root, b.Doc))
		if err != nil {
			t.Fatal(err)
		}
		have, ok := docnumbers.Extract(doc, b.Name)
		if !ok {
			t.Errorf("%s: no <!-- numbers:%s --> block", b.Doc, b.Name)
			continue
		}
		want, err := gen(b)
		if err != nil {
			t.Fatal(err)
		}
		if have != want {
			t.Errorf("%s: block %s is stale; run make docs-numbers\nthe doc has:\n%s\nthe code gives:\n%s", b.Doc, b.Name, have, want)
		}
	}
}

// TestEveryMarkerHasAGenerator keeps the markers and docnumbers.Blocks in
// step: a marker nothing regenerates, or a block whose marker is gone,
// fails.
func TestEveryMarkerHasAGenerator(t *testing.T) {
	known := map[string]docnumbers.Block{}
	for _, b := range docnumbers.Blocks {
		known[b.Name] = b
	}
	found := map[string]bool{}
	for _, path := range docFiles(t) {
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for _, name := range docnumbers.Names(doc) {
			b, ok := known[name]
			switch {
			case !ok:
				t.Errorf("%s: marker numbers:%s has no docnumbers.Block", rel, name)
			case b.Doc != filepath.ToSlash(rel):
				t.Errorf("%s: marker numbers:%s belongs in %s", rel, name, b.Doc)
			}
			found[name] = true
		}
	}
	for name, b := range known {
		if !found[name] {
			t.Errorf("docnumbers.Blocks has %s, but %s has no marker for it", name, b.Doc)
		}
	}
}
