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

// numberedHeading is a PITFALLS.md heading that starts with a number.
var numberedHeading = regexp.MustCompile(`^#{2,3} [0-9]+[.)]? `)

// TestPITFALLSEntriesAreNamedNotNumbered checks that the entries of every
// PITFALLS.md are named by what they show, and that no two headings of the
// four files share a name: a name then finds one entry wherever it is
// cited, and adding an entry renumbers nothing.
func TestPITFALLSEntriesAreNamedNotNumbered(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "*", "PITFALLS.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no PITFALLS.md files: %v", err)
	}
	where := map[string]string{}
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		for _, h := range pitfallHeadings(t, file) {
			if numberedHeading.MatchString(h.line) {
				t.Errorf("%s: %q is numbered: name the entry by what it shows", rel, h.line)
			}
			if other, ok := where[h.name]; ok {
				t.Errorf("%s and %s both have a heading %q", other, rel, h.name)
			}
			where[h.name] = rel
		}
	}
}

// pitfallCitation is a citation of a PITFALLS.md entry by its heading, in
// prose or a comment: the file, with or without its folder and backticks,
// then " entry" or a comma, then the heading in double quotes. Without
// the folder it means the PITFALLS.md of the folder the citing file is in,
// or, from a design page docs/NAME.md, NAME/PITFALLS.md.
var pitfallCitation = regexp.MustCompile("`?((?:[A-Za-z0-9_.-]+/)*)PITFALLS\\.md`?(?: entry|,) \"([^\"]+)\"")

// pitfallLink is a Markdown link to a heading of a PITFALLS.md, or to one
// of the same page (#anchor) when the link is in a PITFALLS.md.
var pitfallLink = regexp.MustCompile(`\]\(([^)\s#]*PITFALLS\.md)?#([^)\s]+)\)`)

// exerciseEntry is an exercise README's "- Entry:" line.
var exerciseEntry = regexp.MustCompile("(?m)^- Entry: `([^`]+)`, section \"(.*)\"$")

// TestPITFALLSCitationsResolve checks that every citation of a PITFALLS.md
// entry names a heading that file has: links to its headings from any doc
// (and within it), the exercises' Entry lines, and citations by name in
// docs and Go comments.
func TestPITFALLSCitationsResolve(t *testing.T) {
	headings := map[string]map[string]bool{} // PITFALLS.md, from root → heading names
	anchors := map[string]map[string]bool{}
	files, err := filepath.Glob(filepath.Join(root, "*", "PITFALLS.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no PITFALLS.md files: %v", err)
	}
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		rel = filepath.ToSlash(rel)
		headings[rel] = map[string]bool{}
		for _, h := range pitfallHeadings(t, file) {
			headings[rel][h.name] = true
		}
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		anchors[rel] = anchorsOf(string(text))
	}
	checked := 0
	resolve := func(from, file, name string) {
		checked++
		if headings[file] == nil {
			t.Errorf("%s cites %q in %s, which is not a PITFALLS.md", from, name, file)
		} else if !headings[file][name] {
			t.Errorf("%s cites %q, which %s has no heading for", from, name, file)
		}
	}
	for _, doc := range docFiles(t) {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		page := filepath.ToSlash(rel)
		text := string(raw)
		for _, m := range pitfallLink.FindAllStringSubmatch(text, -1) {
			target := page
			if m[1] != "" {
				target = filepath.ToSlash(filepath.Join(filepath.Dir(page), m[1]))
			} else if filepath.Base(page) != "PITFALLS.md" {
				continue
			}
			checked++
			if anchors[target] == nil {
				t.Errorf("%s: %s: %s is not a PITFALLS.md", page, m[0], target)
			} else if !anchors[target][m[2]] {
				t.Errorf("%s: %s: %s has no heading with the anchor #%s", page, m[0], target, m[2])
			}
		}
		for _, m := range exerciseEntry.FindAllStringSubmatch(text, -1) {
			resolve(page, m[1], m[2])
		}
		for _, m := range pitfallCitation.FindAllStringSubmatch(strings.Join(strings.Fields(text), " "), -1) {
			file := m[1] + "PITFALLS.md"
			if m[1] == "" {
				file = pitfallsAbove(page)
			}
			resolve(page, file, m[2])
		}
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "out" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		for _, c := range f.Comments {
			for _, m := range pitfallCitation.FindAllStringSubmatch(strings.Join(strings.Fields(c.Text()), " "), -1) {
				file := m[1] + "PITFALLS.md"
				if m[1] == "" {
					file = pitfallsAbove(rel)
				}
				resolve(rel, file, m[2])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no citation of a PITFALLS.md entry found: the check is not reaching them")
	}
}

// pitfallsAbove returns the PITFALLS.md that a citation naming no folder
// means in the file rel (from root, slash-separated): the one of the top
// folder rel is in, or NAME/PITFALLS.md from docs/NAME.md.
func pitfallsAbove(rel string) string {
	top, rest, _ := strings.Cut(rel, "/")
	if name, ok := strings.CutSuffix(rest, ".md"); ok && top == "docs" && !strings.Contains(name, "/") {
		return name + "/PITFALLS.md"
	}
	return top + "/PITFALLS.md"
}

type pitfallHeading struct{ line, name string }

// pitfallHeadings returns the ## and ### headings of a PITFALLS.md, each
// with its name: the heading's text.
func pitfallHeadings(t *testing.T, file string) []pitfallHeading {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var hs []pitfallHeading
	for _, line := range strings.Split(string(text), "\n") {
		for _, p := range []string{"## ", "### "} {
			if name, ok := strings.CutPrefix(line, p); ok {
				hs = append(hs, pitfallHeading{line, strings.TrimSpace(name)})
			}
		}
	}
	return hs
}
