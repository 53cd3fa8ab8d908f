package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"kvlab/internal/docnumbers"
)

// quotesTag marks a paragraph of prose that repeats numbers from a generated
// block: <!-- quotes:BLOCK n1 n2 ... --> on its own line, right before the
// paragraph. Group 1 is the block's name, group 2 the numbers as the prose
// writes them.
var quotesTag = regexp.MustCompile(`(?m)^<!-- quotes:([A-Za-z0-9_.-]+) ([^>]*?) -->\n`)

// TestProseQuotesItsBlock keeps the numbers a paragraph repeats from a
// generated block in step with that block. The block itself is regenerated
// by `make docs-numbers` and checked against the code by
// TestNumbersMatchTheCode, so a paragraph tagged with quotes: cannot go on
// saying a number the code no longer produces: every number the tag lists
// must appear in the paragraph after it and, thousands separators aside, in
// the named block of the same doc.
func TestProseQuotesItsBlock(t *testing.T) {
	tagged := 0
	for _, path := range docFiles(t) {
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for _, m := range quotesTag.FindAllSubmatchIndex(doc, -1) {
			tagged++
			name := string(doc[m[2]:m[3]])
			numbers := strings.Fields(string(doc[m[4]:m[5]]))
			block, ok := docnumbers.Extract(doc, name)
			if !ok {
				t.Errorf("%s: quotes:%s names no generated block in this doc", rel, name)
				continue
			}
			para := paragraphAt(doc[m[1]:])
			inBlock := numberSet(block)
			for _, n := range numbers {
				if !strings.Contains(para, n) {
					t.Errorf("%s: quotes:%s lists %s, but the paragraph after it does not say it:\n%s", rel, name, n, para)
				}
				if !inBlock[plain(n)] {
					t.Errorf("%s: the prose says %s, but block %s no longer has it; rewrite the paragraph from the block", rel, n, name)
				}
			}
		}
	}
	if tagged == 0 {
		t.Fatal("no <!-- quotes: --> tag in any doc: the check is not reaching the docs")
	}
}

// paragraphAt returns the text up to the first blank line.
func paragraphAt(b []byte) string {
	s := string(b)
	if i := strings.Index(s, "\n\n"); i >= 0 {
		s = s[:i]
	}
	return s
}

// number matches a decimal number as docs and tables write it, with or
// without thousands separators.
var number = regexp.MustCompile(`\d[\d,]*(?:\.\d+)?`)

// numberSet returns every number in s, thousands separators removed.
func numberSet(s string) map[string]bool {
	set := map[string]bool{}
	for _, n := range number.FindAllString(s, -1) {
		n = plain(strings.TrimRight(n, ","))
		set[n] = true
		// A table's 1825.0 is the prose's 1,825.
		if whole, frac, ok := strings.Cut(n, "."); ok && strings.Trim(frac, "0") == "" {
			set[whole] = true
		}
	}
	return set
}

// plain drops thousands separators and a trailing percent sign.
func plain(n string) string {
	return strings.TrimSuffix(strings.ReplaceAll(n, ",", ""), "%")
}

func TestNumberSet(t *testing.T) {
	set := numberSet("prefill tok 4817, hit 90.9% of 54,050 and 1,825.0 ms")
	for _, want := range []string{"4817", "90.9", "54050", "1825.0", "1825"} {
		if !set[want] {
			t.Errorf("numberSet misses %s; have %v", want, set)
		}
	}
	if set["4,817"] || set["817"] {
		t.Errorf("numberSet split a number: %v", set)
	}
}
