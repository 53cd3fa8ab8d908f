package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// numberWords spells the counts a doc writes in words.
var numberWords = map[string]int{
	"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
	"seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}

// wordCount finds re in the doc at rel and returns the number its first
// group spells, in words or digits, with the text it matched; it fails the
// test when re is not there.
func wordCount(t *testing.T, rel string, re *regexp.Regexp) (int, string) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	m := re.FindStringSubmatch(string(doc))
	if m == nil {
		t.Fatalf("%s: no text matching %q: the check is not reaching the sentence it guards", rel, re)
	}
	word := strings.ToLower(m[1])
	if n, ok := numberWords[word]; ok {
		return n, m[0]
	}
	n, err := strconv.Atoi(word)
	if err != nil {
		t.Fatalf("%s: %q counts %q, which is not a number", rel, m[0], m[1])
	}
	return n, m[0]
}

// parseGo parses the Go file at rel, from the repository root.
func parseGo(t *testing.T, rel string) (*token.FileSet, *ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	return fset, f
}

// TestHashFunctionCount counts the block hashes the hash index offers, the
// exported functions of phase08_hashcow/blockhash/hash.go that are a
// HashFunc (func(parent uint64, tokens []int32) uint64), and requires
// docs/phase08_hashcow.md to say that many are provided and to name each.
func TestHashFunctionCount(t *testing.T) {
	const code, page = "phase08_hashcow/blockhash/hash.go", "docs/phase08_hashcow.md"
	_, f := parseGo(t, code)
	var hashes []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if ok && fn.Recv == nil && fn.Name.IsExported() && isHashFunc(fn.Type) {
			hashes = append(hashes, fn.Name.Name)
		}
	}
	if len(hashes) == 0 {
		t.Fatalf("%s declares no HashFunc: the check is not reading the hashes", code)
	}
	said, sentence := wordCount(t, page, regexp.MustCompile(`(?i)\b(\w+) functions are provided:`))
	if said != len(hashes) {
		t.Errorf("%s: %q, but %s declares %d: %v", page, sentence, code, len(hashes), hashes)
	}
	doc, _ := os.ReadFile(filepath.Join(root, page))
	for _, h := range hashes {
		if !strings.Contains(string(doc), "`"+code+":"+h+"`") {
			t.Errorf("%s does not name `%s:%s` among the hashes provided", page, code, h)
		}
	}
}

// isHashFunc reports whether ft is func(uint64, []int32) uint64.
func isHashFunc(ft *ast.FuncType) bool {
	var params []string
	for _, p := range ft.Params.List {
		for range max(1, len(p.Names)) {
			params = append(params, types(p.Type))
		}
	}
	if ft.Results == nil || len(ft.Results.List) != 1 || len(ft.Results.List[0].Names) > 1 {
		return false
	}
	return slices.Equal(params, []string{"uint64", "[]int32"}) && types(ft.Results.List[0].Type) == "uint64"
}

// types spells a parameter type as Go writes it, for the few forms
// isHashFunc compares.
func types(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.ArrayType:
		if e.Len == nil {
			return "[]" + types(e.Elt)
		}
	}
	return "?"
}

// TestEvictionPolicyCount counts the eviction policies the compressed trie
// offers, the exported variables of type Policy in
// phase08_compressed/trie/policy.go, and requires the docs that count them
// (docs/README.md's reading order, docs/phase08_compressed.md's heading)
// to say that many, and docs/README.md to name each.
func TestEvictionPolicyCount(t *testing.T) {
	const code = "phase08_compressed/trie/policy.go"
	_, f := parseGo(t, code)
	var policies []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == "Policy" {
				for _, n := range v.Names {
					if n.IsExported() {
						policies = append(policies, n.Name)
					}
				}
			}
		}
	}
	if len(policies) == 0 {
		t.Fatalf("%s declares no Policy variable: the check is not reading the policies", code)
	}
	for _, c := range []struct {
		page string
		re   *regexp.Regexp
	}{
		{"docs/README.md", regexp.MustCompile(`(?i)\b(\w+)\s+eviction\s+policies\b`)},
		{"docs/phase08_compressed.md", regexp.MustCompile(`(?im)^###\s+(\w+) policies$`)},
	} {
		said, sentence := wordCount(t, c.page, c.re)
		if said != len(policies) {
			t.Errorf("%s: %q, but %s declares %d: %v", c.page, strings.Join(strings.Fields(sentence), " "), code, len(policies), policies)
		}
	}
	readme, _ := os.ReadFile(filepath.Join(root, "docs/README.md"))
	for _, p := range policies {
		if !strings.Contains(string(readme), "`"+p+"`") {
			t.Errorf("docs/README.md does not name `%s` among the compressed trie's eviction policies", p)
		}
	}
}

// readingPathRef is a declaration a reading path names: file:Symbol, as
// the docs write it.
var readingPathRef = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.go)(?::([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)?))?`")

// pathLength matches the sentence a design page gives the length of its
// reading path in.
var pathLength = regexp.MustCompile(`The path is (\d+) lines of Go`)

// TestReadingPathLengths counts the lines a learner reads on each design
// page's reading path — every declaration an item names as file:Symbol
// (its doc comment included), or every line of a file an item names
// alone, once each, in the items before the one that starts with
// "Optional" — and requires the page to give that number ("The path is N
// lines of Go").
func TestReadingPathLengths(t *testing.T) {
	for _, page := range designPages {
		doc, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		section, ok := markdownSection(string(doc), "## Reading path")
		if !ok {
			t.Errorf("%s: no section \"## Reading path\"", page)
			continue
		}
		items := regexp.MustCompile(`(?m)^\d+\. `).Split(section, -1)[1:]
		optional := slices.IndexFunc(items, func(s string) bool { return strings.HasPrefix(s, "Optional") })
		if optional < 0 {
			t.Errorf("%s: the reading path has no item that starts with \"Optional\" to end what it counts", page)
			continue
		}
		n, refs := readingPathLines(t, items[:optional])
		m := pathLength.FindStringSubmatch(section)
		if m == nil {
			t.Errorf("%s: the reading path does not say how long it is (%q); it is %d lines over %d declarations", page, pathLength, n, refs)
			continue
		}
		if said, _ := strconv.Atoi(m[1]); said != n {
			t.Errorf("%s: %q, but the declarations its items name are %d lines", page, m[0], n)
		}
		t.Logf("%s: %d lines over %d declarations", page, n, refs)
	}
}

// markdownSection returns the text after heading up to the next heading of
// the same level.
func markdownSection(doc, heading string) (string, bool) {
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		return "", false
	}
	rest := doc[i+len(heading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest, true
}

// readingPathLines returns the lines of the declarations and files the
// items name, and how many there are.
func readingPathLines(t *testing.T, items []string) (lines, refs int) {
	t.Helper()
	seen := map[string]bool{}
	for _, item := range items {
		for _, m := range readingPathRef.FindAllStringSubmatch(item, -1) {
			file, sym := m[1], m[2]
			if seen[file+":"+sym] {
				continue
			}
			seen[file+":"+sym] = true
			refs++
			n, ok := declLines(t, file, sym)
			if !ok {
				t.Errorf("the reading path names %s:%s, which is no declaration there", file, sym)
			}
			lines += n
		}
	}
	return lines, refs
}

// declLines returns the lines of sym's declaration in file, doc comment
// included (a method is Type.Method; a name in a grouped declaration
// counts its own spec), or of the whole file when sym is empty.
func declLines(t *testing.T, file, sym string) (int, bool) {
	t.Helper()
	fset, f := parseGo(t, file)
	span := func(doc *ast.CommentGroup, from, to token.Pos) int {
		if doc != nil {
			from = doc.Pos()
		}
		return fset.Position(to).Line - fset.Position(from).Line + 1
	}
	if sym == "" {
		return fset.Position(f.End()).Line, true
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) > 0 {
				recv := d.Recv.List[0].Type
				if s, ok := recv.(*ast.StarExpr); ok {
					recv = s.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					name = id.Name + "." + name
				}
			}
			if name == sym {
				return span(d.Doc, d.Pos(), d.End()), true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				var names []*ast.Ident
				var doc *ast.CommentGroup
				switch s := s.(type) {
				case *ast.TypeSpec:
					names, doc = []*ast.Ident{s.Name}, s.Doc
				case *ast.ValueSpec:
					names, doc = s.Names, s.Doc
				}
				for _, n := range names {
					if n.Name != sym {
						continue
					}
					if !d.Lparen.IsValid() { // not grouped: the declaration is the spec
						return span(d.Doc, d.Pos(), d.End()), true
					}
					return span(doc, s.Pos(), s.End()), true
				}
			}
		}
	}
	return 0, false
}
