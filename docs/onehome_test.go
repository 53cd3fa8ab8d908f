package docs

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// designPages teach the three prefix caches. What they say about time is
// measured on some machine, by some command, on some day; those three
// facts live with the number on a benchmark page (benchmarksPage and
// benchmarkPages), and a design page says what the number teaches and
// links the section that holds it.
var designPages = []string{
	"docs/phase08_prefix.md",
	"docs/phase08_hashcow.md",
	"docs/phase08_compressed.md",
}

// benchmarksPage is the index of the measured numbers: a few lines per
// topic, and an anchor for each section of the single page the topic
// pages were cut from, which leads on to where that section lives now.
// With the topic pages it is the one home of every measured number.
const benchmarksPage = "docs/benchmarks.md"

// benchmarkPages matches the topic pages, which hold the measurements.
const benchmarkPages = "docs/benchmarks/*.md"

// benchmarkFiles returns the index and the topic pages, relative to the
// repository root; it fails when there is no topic page, so that no check
// built on it passes by reading nothing.
func benchmarkFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, benchmarkPages))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatalf("no page matches %s", benchmarkPages)
	}
	files := []string{benchmarksPage}
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// loadBenchHome reads the index and the topic pages into a benchHome,
// failing on each anchor of the index that is ambiguous or leads nowhere.
func loadBenchHome(t *testing.T) benchHome {
	t.Helper()
	texts := map[string]string{}
	for _, f := range benchmarkFiles(t) {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		texts[strings.TrimPrefix(f, "docs/")] = string(text)
	}
	home, problems := newBenchHome(texts)
	for _, p := range problems {
		t.Error(p)
	}
	return home
}

// TestMeasurementsLiveInBenchmarks fails when a design page states a
// wall-clock measurement that the benchmark pages (docs/benchmarks.md and
// docs/benchmarks/*.md) do not hold: a number
// with a unit of time or throughput (ns, µs, ms, s, ns/token, ns/op,
// tok/s, GB/s, …), a speed-up or growth written N× or ×N, or a number in a
// table whose column, row or corner names such a unit. Such a number may
// stand on a design page only in a paragraph that links a section of a
// benchmark page, and only if that section has the number too, so that
// the reader is one click from its command, machine and date. A link to
// an anchor the index keeps for a section that moved to a topic page
// counts as a link to that section; a link to the index without an
// anchor, as one to every benchmark page.
//
// Left out of the check: fenced and indented code (commands and their
// output), inline code (flags such as -benchtime 300ms), the generated
// <!-- numbers:NAME --> blocks (TestNumbersMatchTheCode checks them), and
// the numbers a <!-- quotes:BLOCK n1 n2 --> tag lists for its paragraph
// (TestProseQuotesItsBlock checks them). Sizes (bytes, KB, MiB) and
// percentages are not timings and are not looked for.
//
// A number that reads like a measurement and is not one — the virtual
// clock's 50 ms step, an arrival time on that clock — is exempted where it
// stands, by a marker on the line right before its paragraph that names
// the numbers and says why:
//
//	<!-- not-measured 50 125: times on the virtual clock, set by -clock -->
//
// A marker exempts only the numbers it lists, only in that paragraph, must
// give a reason, and fails if its paragraph no longer says a number it
// lists. TestMeasurementDetector shows what is and is not taken for a
// measurement.
func TestMeasurementsLiveInBenchmarks(t *testing.T) {
	home := loadBenchHome(t)
	for _, page := range designPages {
		doc, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		if len(blocksOf(string(doc))) == 0 {
			t.Fatalf("%s: no paragraph found: the check is not reaching the page", page)
		}
		problems, n := homeless(string(doc), home)
		for _, p := range problems {
			t.Errorf("%s:%d: %s", page, p.line, p.msg)
		}
		if len(problems) == 0 {
			t.Logf("%s: %d measurements, each in the benchmark section its paragraph links", page, n)
		}
	}
}

// TestMeasurementDetector pins what counts as a measurement, what is left
// out, and that a new timing without a home fails.
func TestMeasurementDetector(t *testing.T) {
	bench, problems := newBenchHome(map[string]string{
		"benchmarks.md": "# Benchmarks\n\n## Prefix caches at scale\n\nEvict(64) 1.4 → 1.7 → 2.2 µs, one full GC 10.6 ms.\n\n## Other\n\nMatch 0.82 ns/token.\n\n" +
			"## Where the sections went\n\n- <a id=\"moved\"></a>[Moved](benchmarks/topic.md#moved)\n",
		"benchmarks/topic.md": "# Topic\n\n## Latest result\n\nGC 0.98 ms.\n\n## Moved\n\nInsert 11.9 µs.\n",
	})
	if len(problems) > 0 {
		t.Fatalf("the fixture's benchmark pages: %v", problems)
	}
	for _, c := range []struct {
		name string
		page string
		want []string // a substring of each problem, in order
	}{
		{"a new timing", "Evict(64) takes 7.3 µs at 10k blocks.\n", []string{"states 7.3, measured, and links no section"}},
		{"a range", "A collection took 5.1–11.3 ms.\n", []string{"states 5.1, 11.3,"}},
		{"a chain", "It went 1.4 → 1.7 → 2.9 µs.\n", []string{"states 1.4, 1.7, 2.9,"}},
		{"seconds", "The run took 0.23 s and 0.16 s.\n", []string{"states 0.23, 0.16,"}},
		{"a speed-up", "Match is 1.12× the pointer tree's.\n", []string{"states 1.12,"}},
		{"a growth", "Evict grows ×1.7 from 10k to 1M.\n", []string{"states 1.7,"}},
		{"a table column", "| size | scan ns/op |\n|---|---|\n| 4 | 455 |\n", []string{"states 455,"}},
		{"a table row", "| at 1M | before |\n|---|---|\n| one full GC, ms | 1.85 |\n", []string{"states 1.85,"}},
		{"a table corner", "| µs | 10k |\n|---|---|\n| Evict(64) | 7.3 |\n", []string{"states 7.3,"}},
		{"linked, but not in that section",
			"Match costs 0.82 ns/token ([benchmarks.md](benchmarks.md#prefix-caches-at-scale)).\n",
			[]string{"states 0.82, which no section it links (benchmarks.md#prefix-caches-at-scale) has"}},
		{"a dead anchor", "It took 10.6 ms ([benchmarks.md](benchmarks.md#no-such-section)).\n",
			[]string{"no section #no-such-section", "states 10.6, which"}},
		{"linked and in that section",
			"It grows from 1.4 to 2.2 µs ([benchmarks.md, Prefix caches at scale](benchmarks.md#prefix-caches-at-scale)).\n", nil},
		{"linked to the whole page", "Match costs 0.82 ns/token ([benchmarks.md](benchmarks.md)).\n", nil},
		{"a flag in inline code", "Run with `-benchtime 300ms` and `-clock step:50ms`.\n", nil},
		{"fenced code", "```\ngo test ./x # about 6 s of CPU\n```\n", nil},
		{"indented code", "Run:\n\n    ./x.test -test.benchtime 2000x # 3 ms\n", nil},
		{"a generated block", "<!-- numbers:x -->\n```\nTTFT 75.0 ms\n```\n<!-- /numbers -->\n", nil},
		{"sizes and arithmetic", "One 4 KB comparison; 3 + 4 × 3 = 15 blocks; 8 requests/s; 16 MiB.\n", nil},
		{"a token table", "| name | prefill (tok) | hit (%) |\n|---|---|---|\n| tree | 4817 | 90.9 |\n", nil},
		{"quoted from a block", "<!-- quotes:x 75 -->\nThe median is 75 ms.\n", nil},
		{"quoted, but another number is not", "<!-- quotes:x 75 -->\nThe median is 75 ms, 80 ms on the wall clock.\n", []string{"states 80,"}},
		{"not measured", "<!-- not-measured 50: the virtual clock's step -->\nEach step counts as 50 ms.\n", nil},
		{"not measured, no reason", "<!-- not-measured 50 -->\nEach step counts as 50 ms.\n", []string{"gives no reason"}},
		{"not measured, malformed", "<!-- not-measured: the step -->\nEach step counts as 50 ms.\n", []string{"not a marker this check reads", "states 50,"}},
		{"a table linked from the paragraph before it",
			"The runs ([benchmarks.md](benchmarks.md#prefix-caches-at-scale)):\n\n| GC, ms | 10k |\n|---|---|\n| trie | 10.6 |\n", nil},
		{"not measured, stale", "<!-- not-measured 50: the step -->\nEach step counts as 40 ms.\n", []string{"states 40,", "lists 50"}},
		{"a topic page's section", "Insert takes 11.9 µs ([topic](benchmarks/topic.md#moved)).\n", nil},
		{"a topic page's other section", "GC takes 0.98 ms ([topic](benchmarks/topic.md#moved)).\n",
			[]string{"states 0.98, which no section it links (benchmarks/topic.md#moved) has"}},
		{"a whole topic page", "GC takes 0.98 ms ([topic](benchmarks/topic.md)).\n", nil},
		{"through an anchor the index keeps", "Insert takes 11.9 µs ([benchmarks.md](benchmarks.md#moved)).\n", nil},
		{"through an anchor the index keeps, to a section without the number",
			"GC takes 0.98 ms ([benchmarks.md](benchmarks.md#moved)).\n", []string{"states 0.98, which"}},
		{"the whole index is every page", "GC takes 0.98 ms ([benchmarks.md](benchmarks.md)).\n", nil},
		{"a dead anchor on a topic page", "Insert takes 11.9 µs ([topic](benchmarks/topic.md#gone)).\n",
			[]string{"benchmarks/topic.md has no section #gone", "states 11.9, which"}},
		{"no such topic page", "Insert takes 11.9 µs ([none](benchmarks/none.md#moved)).\n",
			[]string{"benchmarks/none.md is no benchmark page", "states 11.9, which"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			problems, _ := homeless(c.page, bench)
			if len(problems) != len(c.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(problems), len(c.want), problems)
			}
			for i, w := range c.want {
				if !strings.Contains(problems[i].msg, w) {
					t.Errorf("problem %d is %q; want it to say %q", i, problems[i].msg, w)
				}
			}
		})
	}
}

// anchorLink matches a relative link to a heading: group 1 is the file
// (empty for the same page), group 2 the anchor.
var anchorLink = regexp.MustCompile(`\]\(([A-Za-z0-9_./-]*\.md)?#([^)\s]+)\)`)

// TestSectionLinksResolve checks that every link to a heading
// (page.md#anchor, or #anchor on the same page) from the design pages and
// the benchmark pages, and every such link from any doc into a benchmark
// page, names an anchor that page has: a heading, as GitHub spells its
// anchors, or an <a id="..."> (the index keeps one for each section of the
// single page the topic pages were cut from). A measurement is found
// through such a link. TestCodeReferencesResolve checks that the linked
// file exists.
func TestSectionLinksResolve(t *testing.T) {
	checkAll := map[string]bool{}
	for _, p := range append(designPages[:len(designPages):len(designPages)], benchmarkFiles(t)...) {
		checkAll[p] = true
	}
	isBench := map[string]bool{}
	for _, p := range benchmarkFiles(t) {
		isBench[p] = true
	}
	checked, intoBench := 0, 0
	for _, file := range docFiles(t) {
		rel, _ := filepath.Rel(root, file)
		page := filepath.ToSlash(rel)
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range anchorLink.FindAllStringSubmatch(string(doc), -1) {
			target := page
			if m[1] != "" {
				target = filepath.ToSlash(filepath.Join(filepath.Dir(page), m[1]))
			}
			if !checkAll[page] && !isBench[target] {
				continue
			}
			text, err := os.ReadFile(filepath.Join(root, target))
			if err != nil {
				t.Errorf("%s: %s: %v", page, m[0], err)
				continue
			}
			checked++
			if isBench[target] && !checkAll[page] {
				intoBench++
			}
			if !anchorsOf(string(text))[m[2]] {
				t.Errorf("%s: %s: %s has no heading or <a id> with the anchor #%s", page, m[0], target, m[2])
			}
		}
	}
	if checked == 0 {
		t.Fatal("no link to a heading found: the check is not reaching the pages")
	}
	t.Logf("%d links to a heading, %d of them from other docs into a benchmark page", checked, intoBench)
}

// TestBenchmarkPagesOpenWithLatestResult keeps the topic pages in the
// shape a reader relies on: each opens with a "Latest result" section (its
// first ## heading) that names a command, a date and the machine, and
// links back to the index; the index links every topic page.
func TestBenchmarkPagesOpenWithLatestResult(t *testing.T) {
	index, err := os.ReadFile(filepath.Join(root, benchmarksPage))
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range benchmarkFiles(t)[1:] {
		doc, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		text := string(doc)
		name := strings.TrimPrefix(page, "docs/")
		if !strings.Contains(string(index), "]("+name+")") {
			t.Errorf("%s does not link %s", benchmarksPage, name)
		}
		if !strings.Contains(text, "](../benchmarks.md)") {
			t.Errorf("%s does not link back to the index (../benchmarks.md)", page)
		}
		latest, ok := firstSection(text)
		if !ok {
			t.Errorf("%s: its first ## heading is not \"Latest result\"", page)
			continue
		}
		if !command.MatchString(latest) {
			t.Errorf("%s: its Latest result names no command (`make ...`, `go ...`)", page)
		}
		if !date.MatchString(latest) {
			t.Errorf("%s: its Latest result gives no date (YYYY-MM-DD)", page)
		}
		if !machine.MatchString(latest) {
			t.Errorf("%s: its Latest result does not say what machine it ran on", page)
		}
	}
}

var (
	// command is a command in inline code, perhaps after variables.
	command = regexp.MustCompile("`(?:[A-Z0-9_]+=(?:<[^>]*>|\\S+) )*(?:make|go|taskset|bin/[a-z0-9_]+) [^`]+`")
	date    = regexp.MustCompile(`\b20\d\d-\d\d-\d\d\b`)
	machine = regexp.MustCompile(`\b(?:[Mm]achine|VM|vCPUs?|cores?|AMD EPYC)\b`)
)

// firstSection returns the text of a page's first ## section if its
// heading is "Latest result".
func firstSection(page string) (string, bool) {
	for _, sec := range sections(page) {
		heading, _, _ := strings.Cut(sec, "\n")
		if !strings.HasPrefix(heading, "## ") {
			continue
		}
		if heading != "## Latest result" {
			return "", false
		}
		return sec, true
	}
	return "", false
}

type problem struct {
	line int
	msg  string
}

func (p problem) String() string { return fmt.Sprintf("%d: %s", p.line, p.msg) }

// homeless returns the problems with the measurements of page: each one
// that no linked section of bench holds, each link to a section bench does
// not have, and each not-measured marker that is wrong. It also returns how
// many measurements it found.
func homeless(page string, bench benchHome) ([]problem, int) {
	var problems []problem
	found := 0
	var prev block
	for _, b := range blocksOf(page) {
		exempt := map[string]bool{}
		listed := map[string]bool{} // by not-measured
		first, _, _ := strings.Cut(b.text, "\n")
		if m := quotesTag.FindStringSubmatch(first + "\n"); m != nil {
			for _, n := range strings.Fields(m[2]) {
				exempt[canonical(n)] = true
			}
		}
		if strings.HasPrefix(b.text, "<!-- not-measured") && !notMeasured.MatchString(b.text) {
			problems = append(problems, problem{b.line, fmt.Sprintf("%q is not a marker this check reads: write <!-- not-measured N1 N2: why -->", first)})
		}
		if m := notMeasured.FindStringSubmatch(b.text); m != nil {
			if strings.TrimSpace(m[2]) == "" {
				problems = append(problems, problem{b.line, fmt.Sprintf("%q gives no reason: say why its numbers are not measurements", m[0])})
			}
			for _, n := range strings.Fields(m[1]) {
				exempt[canonical(n)] = true
				listed[canonical(n)] = false
			}
		}
		links := benchLinks.FindAllStringSubmatch(b.text, -1)
		for _, l := range links {
			if _, ok := bench.pages[l[1]]; !ok {
				problems = append(problems, problem{b.line, fmt.Sprintf("%s is no benchmark page", l[1])})
			} else if _, ok := bench.section(l[1], l[2]); !ok {
				problems = append(problems, problem{b.line, fmt.Sprintf("%s has no section #%s", l[1], l[2])})
			}
		}
		if b.table && len(links) == 0 {
			// A table's link may stand in the paragraph that introduces it.
			links = benchLinks.FindAllStringSubmatch(prev.text, -1)
		}
		var home []map[string]bool
		var linked []string
		for _, l := range links {
			target := l[1]
			if l[2] != "" {
				target += "#" + l[2]
			}
			linked = append(linked, target)
			if s, ok := bench.section(l[1], l[2]); ok {
				home = append(home, s)
			}
		}
		var orphans, contradicting []string
		for _, n := range measurements(b) {
			c := canonical(n)
			if _, ok := listed[c]; ok {
				listed[c] = true
			}
			if exempt[c] {
				continue
			}
			found++
			switch {
			case len(links) == 0:
				orphans = append(orphans, n)
			case !inAny(home, c):
				contradicting = append(contradicting, n)
			}
		}
		if len(orphans) > 0 {
			problems = append(problems, problem{b.line, fmt.Sprintf("states %s, measured, and links no section of a benchmark page (benchmarks.md, benchmarks/*.md): move the measurement there with its command, machine and date, and link its section here (if it is no measurement, mark the paragraph <!-- not-measured %s: why -->)", strings.Join(orphans, ", "), strings.Join(orphans, " "))})
		}
		if len(contradicting) > 0 {
			problems = append(problems, problem{b.line, fmt.Sprintf("states %s, which no section it links (%s) has: the page contradicts its home, or the number has none", strings.Join(contradicting, ", "), strings.Join(linked, ", "))})
		}
		for _, n := range slices.Sorted(maps.Keys(listed)) {
			if !listed[n] {
				problems = append(problems, problem{b.line, fmt.Sprintf("the not-measured marker lists %s, which its paragraph no longer says as a time", n)})
			}
		}
		prev = b
	}
	return problems, found
}

func inAny(sets []map[string]bool, n string) bool {
	for _, s := range sets {
		if s[n] {
			return true
		}
	}
	return false
}

// notMeasured is the marker that exempts numbers of its paragraph: the
// numbers, then a colon and the reason.
var notMeasured = regexp.MustCompile(`^<!-- not-measured ([0-9., ]+?)(?::([^>]*?))? -->`)

// benchLinks matches a link from a page in docs/ to a benchmark page:
// group 1 is the page (benchmarks.md or benchmarks/NAME.md), group 2 its
// anchor, empty for the whole page.
var benchLinks = regexp.MustCompile(`\]\((?:\./)?(benchmarks(?:/[A-Za-z0-9_.-]+)?\.md)(?:#([^)\s]*))?\)`)

// keptAnchor matches a line of the index that keeps an anchor of the
// single page the topic pages were cut from and leads on to the section's
// new place: <a id="ANCHOR"></a>[title](benchmarks/PAGE.md#ANCHOR).
// Groups: the anchor, the page, the anchor there.
var keptAnchor = regexp.MustCompile(`<a id="([^"]+)"></a>\[[^\]]*\]\((benchmarks/[A-Za-z0-9_.-]+\.md)#([^)\s]+)\)`)

// explicitAnchor matches an anchor written as HTML.
var explicitAnchor = regexp.MustCompile(`<a id="([^"]+)"></a>`)

// benchHome is the measured record: the numbers of each section of each
// benchmark page, by the page's path relative to docs/ (benchmarks.md,
// benchmarks/NAME.md) and the section's anchor, and the anchors the index
// keeps for sections that now live on a topic page.
type benchHome struct {
	pages map[string]map[string]map[string]bool
	kept  map[string][2]string // anchor of the index → page, anchor there
}

// newBenchHome reads the benchmark pages, by path relative to docs/. It
// returns a problem for each anchor the index keeps that is also one of its
// headings, is kept twice, or leads to no section.
func newBenchHome(texts map[string]string) (benchHome, []string) {
	h := benchHome{pages: map[string]map[string]map[string]bool{}, kept: map[string][2]string{}}
	for name, text := range texts {
		h.pages[name] = sectionsOf(text)
	}
	var problems []string
	index, ok := h.pages["benchmarks.md"]
	if !ok {
		return h, []string{"no benchmarks.md among the benchmark pages"}
	}
	for _, m := range keptAnchor.FindAllStringSubmatch(texts["benchmarks.md"], -1) {
		anchor, page, there := m[1], m[2], m[3]
		switch _, heading := index[anchor]; {
		case heading:
			problems = append(problems, fmt.Sprintf("benchmarks.md keeps #%s for %s#%s, but a heading of its own has that anchor", anchor, page, there))
		case h.kept[anchor] != [2]string{}:
			problems = append(problems, fmt.Sprintf("benchmarks.md keeps #%s twice", anchor))
		}
		if _, ok := h.pages[page][there]; !ok {
			problems = append(problems, fmt.Sprintf("benchmarks.md keeps #%s for %s#%s, which has no such section", anchor, page, there))
		}
		h.kept[anchor] = [2]string{page, there}
	}
	return h, problems
}

// section returns the numbers of a section of a benchmark page: the whole
// page for an empty anchor, every page for the whole index, and the
// section a kept anchor of the index leads to.
func (h benchHome) section(page, anchor string) (map[string]bool, bool) {
	if page == "benchmarks.md" {
		if anchor == "" {
			all := map[string]bool{}
			for _, p := range h.pages {
				for n := range p[""] {
					all[n] = true
				}
			}
			return all, true
		}
		if to, ok := h.kept[anchor]; ok {
			page, anchor = to[0], to[1]
		}
	}
	s, ok := h.pages[page][anchor]
	return s, ok
}

// anchorsOf returns the anchors of a Markdown page: its headings' and its
// <a id="..."> elements'.
func anchorsOf(page string) map[string]bool {
	anchors := map[string]bool{}
	for a := range sectionsOf(page) {
		if a != "" {
			anchors[a] = true
		}
	}
	for _, m := range explicitAnchor.FindAllStringSubmatch(page, -1) {
		anchors[m[1]] = true
	}
	return anchors
}

// block is a paragraph, list or table: lines between blank lines, outside
// code and generated blocks.
type block struct {
	line  int // where it starts, from 1
	text  string
	table bool
}

// blocksOf splits a Markdown page into blocks, leaving out fenced code,
// indented code and the generated numbers blocks.
func blocksOf(page string) []block {
	var blocks []block
	var cur []string
	start := 0
	flush := func() {
		if len(cur) > 0 {
			b := block{line: start, text: strings.Join(cur, "\n")}
			b.table = strings.HasPrefix(strings.TrimSpace(cur[0]), "|") ||
				(len(cur) > 1 && strings.HasPrefix(strings.TrimSpace(cur[1]), "|"))
			if !indentedCode(cur) {
				blocks = append(blocks, b)
			}
		}
		cur = nil
	}
	fence, generated := "", false
	for i, l := range strings.Split(page, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case generated:
			generated = !strings.HasPrefix(trimmed, "<!-- /numbers")
			continue
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		case strings.HasPrefix(trimmed, "<!-- numbers:"):
			flush()
			generated = true
			continue
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			flush()
			fence = trimmed[:3]
			continue
		case trimmed == "":
			flush()
			continue
		}
		if len(cur) == 0 {
			start = i + 1
		}
		cur = append(cur, l)
	}
	flush()
	return blocks
}

// indentedCode reports whether every line of a block is indented by four
// spaces or a tab: Markdown's indented code, which the docs use for
// commands.
func indentedCode(lines []string) bool {
	for _, l := range lines {
		if !strings.HasPrefix(l, "    ") && !strings.HasPrefix(l, "\t") {
			return false
		}
	}
	return true
}

const num = `\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?`

var (
	// numRun is numbers joined into a range or a sequence: 5.1–11.3,
	// 1.4 → 1.7 → 2.2, 0.23 and 0.16, 186 and 471.
	numRun = `(?:` + num + `)(?:\s*(?:–|—|-|→|\bto\b|\band\b|,)\s*(?:` + num + `))*`
	// timedRun is such a run followed by a unit of time or throughput.
	timedRun = regexp.MustCompile(`(` + numRun + `)\s?(?:ns/token|ns/op|ns/block|ns|µs|μs|ms|seconds?|sec|s|minutes?|tok/s|tokens/s|GB/s|MB/s|GFLOP/s)(?:[^\pL\pN/]|$)`)
	// timesRun is a speed-up or a growth: 1.12×, ×1.7, ×5–6, 2x. A × with
	// spaces around it is a product (4 × 3 = 12) and is not one.
	timesRun = regexp.MustCompile(`×(` + numRun + `)|(` + numRun + `)(?:×|x\b)`)
	// timeUnit is a unit of time or throughput named in a table heading.
	timeUnit = regexp.MustCompile(`(?:^|[\s(,])(?:ns/token|ns/op|sec/op|sec/token|ns|µs|μs|ms|s|GC-ms|tok/s|tokens/s|GB/s|MB/s)(?:[\s),]|$)`)
	numberRE = regexp.MustCompile(num)
	// inlineCode, comments and link targets hold no measurements.
	inlineCode = regexp.MustCompile("`[^`]*`")
	comment    = regexp.MustCompile(`(?s)<!--.*?-->`)
	linkTarget = regexp.MustCompile(`\]\([^)]*\)`)
)

// measurements returns the numbers of a block that are timings, as the
// block writes them.
func measurements(b block) []string {
	text := linkTarget.ReplaceAllString(comment.ReplaceAllString(inlineCode.ReplaceAllString(b.text, " "), " "), "]")
	var out []string
	add := func(run string) {
		out = append(out, numberRE.FindAllString(run, -1)...)
	}
	flat := strings.Join(strings.Fields(text), " ")
	for _, m := range timedRun.FindAllStringSubmatch(flat, -1) {
		add(m[1])
	}
	for _, m := range timesRun.FindAllStringSubmatch(flat, -1) {
		add(m[1] + " " + m[2])
	}
	if b.table {
		out = append(out, tableTimings(text)...)
	}
	return dedupe(out)
}

// tableTimings returns the numbers of a table's body cells whose column
// heading, row heading (first cell) or corner names a unit of time.
func tableTimings(text string) []string {
	var rows [][]string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		rows = append(rows, cells)
	}
	if len(rows) < 3 {
		return nil
	}
	head := rows[0]
	timed := func(s string) bool { return timeUnit.MatchString(strings.TrimSpace(s)) }
	corner := timed(head[0])
	var out []string
	for _, row := range rows[2:] {
		rowTimed := corner || timed(row[0])
		for j := 1; j < len(row); j++ {
			if rowTimed || (j < len(head) && timed(head[j])) {
				out = append(out, numberRE.FindAllString(row[j], -1)...)
			}
		}
	}
	return out
}

func dedupe(ns []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range ns {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// canonical writes a number one way: no thousands separators, no percent
// sign, no trailing zeros after the point (1,825.0 and 1825 are one number,
// and so are 1.70 and 1.7).
func canonical(n string) string {
	n = strings.TrimSuffix(strings.ReplaceAll(n, ",", ""), "%")
	if strings.Contains(n, ".") {
		n = strings.TrimRight(strings.TrimRight(n, "0"), ".")
	}
	return n
}

// sectionsOf maps each heading's anchor in a Markdown page to the numbers
// of its section (up to the next heading of the same or a higher level,
// so a section includes its subsections); "" maps to the whole page.
func sectionsOf(page string) map[string]map[string]bool {
	type heading struct {
		anchor string
		level  int
		at     int
	}
	var hs []heading
	lines := strings.Split(page, "\n")
	offsets := make([]int, len(lines)+1)
	fence := false
	used := map[string]int{}
	for i, l := range lines {
		offsets[i+1] = offsets[i] + len(l) + 1
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
		}
		if fence {
			continue
		}
		level := len(l) - len(strings.TrimLeft(l, "#"))
		if level == 0 || level > 6 || !strings.HasPrefix(l[level:], " ") {
			continue
		}
		a := slug(l[level+1:])
		if k := used[a]; k > 0 {
			used[a]++
			a = fmt.Sprintf("%s-%d", a, k)
		} else {
			used[a] = 1
		}
		hs = append(hs, heading{a, level, offsets[i]})
	}
	all := canonicalSet(page)
	sections := map[string]map[string]bool{"": all}
	for i, h := range hs {
		end := len(page)
		for _, next := range hs[i+1:] {
			if next.level <= h.level {
				end = next.at
				break
			}
		}
		sections[h.anchor] = canonicalSet(page[h.at:end])
	}
	return sections
}

func canonicalSet(s string) map[string]bool {
	set := map[string]bool{}
	for _, n := range numberRE.FindAllString(s, -1) {
		set[canonical(n)] = true
	}
	return set
}

// slug is the anchor GitHub gives a heading: lower case, spaces to
// hyphens, and punctuation other than hyphens and underscores dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
