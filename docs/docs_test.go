// Package docs holds the lessons (Markdown) and a test that keeps their
// references to the code honest.
package docs

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// codeRef matches a backticked reference such as `common/kvcache/pool.go`,
// `common/kvcache/pool.go:Pool.Grow` or `phase08_prefix/` — anything with a
// slash or a known file extension, optionally followed by :Symbol.
var codeRef = regexp.MustCompile("`([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]*)*\\.(?:go|py|md|json|cu|ptx|sh)|[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*/)(?::([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)?))?`")

// testName matches the name of a test, fuzz target, benchmark or example.
var testName = regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark|Example)[A-Z][A-Za-z0-9_]*`)

// mdLink matches a relative Markdown link target.
var mdLink = regexp.MustCompile(`\]\(([^)#:]+)(?:#[^)]*)?\)`)

// docFiles returns the Markdown files whose references are checked: every
// file under docs/ and docs/benchmarks/, the README, and each folder's
// PITFALLS.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"docs/*.md", "docs/benchmarks/*.md", "*.md", "*/PITFALLS.md", "*/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no Markdown files found")
	}
	return files
}

func TestCodeReferencesResolve(t *testing.T) {
	decls := map[string]map[string]bool{} // file → declared names
	// found maps each path that exists here to the doc that names it; a
	// fresh clone has it only if git does not ignore it (see below).
	found := map[string]string{}
	defer func() { checkNotIgnored(t, found) }()
	for _, doc := range docFiles(t) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		for _, m := range codeRef.FindAllStringSubmatch(string(text), -1) {
			path, sym := m[1], m[2]
			full := filepath.Join(root, path)
			if strings.HasPrefix(path, "../") {
				// Relative to the document, like a Markdown link.
				full = filepath.Join(filepath.Dir(doc), path)
			}
			if r, err := filepath.Rel(root, full); err != nil || strings.HasPrefix(r, "..") || filepath.IsAbs(path) {
				t.Errorf("%s: %s points outside the repository", rel, m[0])
				continue
			}
			if _, err := os.Stat(full); err != nil {
				// A bare file name (no slash) is often a name in prose,
				// e.g. `config.json`; only paths must exist.
				if strings.Contains(path, "/") {
					t.Errorf("%s: %s does not exist", rel, path)
				}
				continue
			}
			if r, _ := filepath.Rel(root, full); strings.Contains(path, "/") {
				found[filepath.ToSlash(r)] = rel
			}
			if sym == "" {
				continue
			}
			if !strings.HasSuffix(path, ".go") {
				t.Errorf("%s: %s:%s — symbols can only be looked up in Go files", rel, path, sym)
				continue
			}
			names, ok := decls[full]
			if !ok {
				names = declaredNames(t, full)
				decls[full] = names
			}
			if !names[sym] {
				t.Errorf("%s: %s declares no %s", rel, path, sym)
			}
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(doc), target)); err != nil {
				t.Errorf("%s: link to %s is dead", rel, target)
			}
		}
	}
}

// declaredNames returns the top-level names of a Go file: functions, types,
// variables, constants, and methods as Type.Method.
func declaredNames(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				names[d.Name.Name] = true
				continue
			}
			recv := d.Recv.List[0].Type
			if s, ok := recv.(*ast.StarExpr); ok {
				recv = s.X
			}
			if ix, ok := recv.(*ast.IndexExpr); ok {
				recv = ix.X
			}
			if id, ok := recv.(*ast.Ident); ok {
				names[id.Name+"."+d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name] = true
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, fld := range st.Fields.List {
							for _, n := range fld.Names {
								names[s.Name.Name+"."+n.Name] = true
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
	return names
}

// TestCitedTestsExist checks that every test a document names is defined:
// in the PITFALLS.md's own folder for a PITFALLS.md, anywhere otherwise.
func TestCitedTestsExist(t *testing.T) {
	all := testsUnder(t, root)
	for _, doc := range docFiles(t) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		defined := all
		if filepath.Base(doc) == "PITFALLS.md" {
			defined = testsUnder(t, filepath.Dir(doc))
		}
		for _, name := range testName.FindAllString(string(text), -1) {
			if !defined[name] {
				t.Errorf("%s cites %s, which no test file there defines", rel, name)
			}
		}
	}
}

// testsUnder returns the names of the test functions in *_test.go files
// under dir.
func testsUnder(t *testing.T, dir string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
				names[fn.Name.Name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// checkNotIgnored fails for every path a doc names that exists here only
// because something generated it: git ignores it (e.g. out/, bin/), so a
// reader's fresh clone has no such path. Outside a git work tree it checks
// nothing.
func checkNotIgnored(t *testing.T, paths map[string]string) {
	t.Helper()
	if len(paths) == 0 {
		return
	}
	var in strings.Builder
	for p := range paths {
		in.WriteString(p + "\n")
	}
	cmd := exec.Command("git", "check-ignore", "--stdin")
	cmd.Dir = root
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case err == nil: // some paths are ignored
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return // none is
	default:
		t.Logf("git check-ignore: %v (not a git work tree?); ignored paths not checked", err)
		return
	}
	for _, p := range strings.Fields(string(out)) {
		t.Errorf("%s: %s exists here but git ignores it, so a fresh clone has no such path", paths[p], p)
	}
}
