package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSymptomTestsLogWhatTheyMeasured checks that every TestPitfall function
// logs what it measured (t.Log, t.Logf, or a symptom collector that logs
// when the test ends), so that `go test -v -run Pitfall ./...` prints a
// line for each.
func TestSymptomTestsLogWhatTheyMeasured(t *testing.T) {
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "out" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "TestPitfall") || fn.Body == nil {
				continue
			}
			n++
			if !logs(fn.Body) {
				t.Errorf("%s: %s logs nothing: it should log its symptom and the fixed behaviour, with measured values", rel, fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no TestPitfall functions found")
	}
}

// logs reports whether body calls a Log or Logf method, or
// cachetest.LogSymptoms.
func logs(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return !found
		}
		switch fun := call.Fun.(type) {
		case *ast.SelectorExpr:
			found = found || fun.Sel.Name == "Logf" || fun.Sel.Name == "Log" || fun.Sel.Name == "LogSymptoms"
		}
		return !found
	})
	return found
}

var pitfallTest = regexp.MustCompile(`\bTestPitfall[A-Za-z0-9_]*`)

// TestPITFALLSEntriesShowWhatYouSee checks that every PITFALLS.md section
// citing a TestPitfall test shows, under "**What you see**", the line that
// test logs.
func TestPITFALLSEntriesShowWhatYouSee(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "*", "PITFALLS.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no PITFALLS.md files: %v", err)
	}
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for _, sec := range sections(string(text)) {
			cited := pitfallTest.FindAllString(sec, -1)
			if len(cited) == 0 {
				continue
			}
			heading, _, _ := strings.Cut(sec, "\n")
			_, block, ok := strings.Cut(sec, "\n**What you see**")
			if !ok {
				t.Errorf("%s, %q: no **What you see** block", rel, heading)
				continue
			}
			for _, name := range cited {
				if !strings.Contains(block, "\n    "+name+": ") {
					t.Errorf("%s, %q: the What you see block has no line of %s", rel, heading, name)
				}
			}
		}
	}
}

// sections splits a Markdown document at its ## and ### headings; the
// text before the first heading is left out.
func sections(text string) []string {
	var out []string
	cur := -1
	for _, line := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "### ") {
			out = append(out, "")
			cur++
		}
		if cur >= 0 {
			out[cur] += line
		}
	}
	return out
}
