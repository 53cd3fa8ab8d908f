package toolcall

import (
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// streamExamples are answers in each format, well-formed and not, with the
// places a stream is most likely to cut wrong: tags split anywhere,
// whitespace next to calls, </tool_call> inside a JSON string, unclosed
// blocks and objects.
var streamExamples = map[Format][]string{
	Hermes: {
		"",
		"plain answer",
		"  spaced  answer \n",
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
		"Let me check.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n",
		"<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"b\",\"arguments\":{\"x\":[1,{\"y\":null}]}}</tool_call>",
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"code\": \"print('</tool_call>')\"}}\n</tool_call> after",
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call> tail",
		"before <tool_call>not json</tool_call> middle <tool_call>{\"name\":\"g\",\"arguments\":{}}</tool_call>  end  ",
		"text <tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"unterminated}}\n</tool_call> more",
		"<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"</tool_call>\"} trailing</tool_call> x",
		"open <tool_call>\n{\"name\": \"f\", \"arguments\": {",
		"<tool_call",
		"a <tool_ca b <tool_call> c",
		"<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call",
		"<tool_call>{\"name\":\"f\",\"arguments\":{}} </tool_cal",
		"<tool_call>   ",
		"x<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>\t\n<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>y",
		"<tool_call>{\"name\":\"f\",\"arguments\":{},\"extra\":1}</tool_call>",
		"<tool_call><tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call></tool_call>",
		"é <tool_call>{\"name\":\"é\",\"arguments\":{\"k\":\"\\u00e9\"}}</tool_call> \u00a0",
	},
	Llama3: {
		"",
		"   ",
		"Paris is sunny.",
		"  Paris {\"name\": \"f\"}",
		"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
		"\n {\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}} \n",
		"{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": 1}}",
		"{\"name\": \"a\", \"parameters\": {}}\n{\"name\": \"b\", \"parameters\": {}}",
		"{\"name\": \"a\", \"parameters\": {}} ;; {\"name\": \"b\", \"parameters\": {}}",
		"{\"name\": \"a\", \"parameters\": {}} and then",
		"{\"name\": \"a\", \"parameters\": \"x\"}",
		"{\"name\": \"a\"",
		"{not json",
		"\u00a0{\"name\": \"a\", \"parameters\": {}}",
	},
	Generic: {
		"",
		"  ",
		"hello",
		"{\"response\": \"Paris is sunny.\"}",
		" {\"response\": \"a \\\"quoted\\\" answer\"} ",
		"{\"tool_call\": {\"name\": \"f\", \"arguments\": {\"a\": 1}}}",
		"{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {\"b\": \"c\"}}]}",
		"{\"tool_calls\": []}",
		"{\"response\": 3}",
		"{\"tool_call\": {\"name\": \"f\"}}",
		"{\"response\": \"x\", \"tool_call\": {\"name\": \"f\", \"arguments\": {}}}",
		"{\"response\": \"x\"} trailing",
		"{",
	},
}

// streamAll feeds text to a Stream in the pieces cut at cuts and joins
// what comes out.
func streamAll(f Format, text string, cuts []int) (string, []Call) {
	s := NewStream(f)
	var content strings.Builder
	var calls []Call
	prev := 0
	for _, c := range append(cuts, len(text)) {
		got, cs := s.Push(text[prev:c])
		content.WriteString(got)
		calls = append(calls, cs...)
		prev = c
	}
	got, cs := s.Finish()
	content.WriteString(got)
	return content.String(), append(calls, cs...)
}

// checkStream holds the stream of text, cut at cuts, to Parse on the whole text.
func checkStream(t *testing.T, f Format, text string, cuts []int) {
	t.Helper()
	wantContent, wantCalls := Parse(f, text)
	gotContent, gotCalls := streamAll(f, text, cuts)
	if gotContent != wantContent || !reflect.DeepEqual(gotCalls, wantCalls) {
		t.Fatalf("%v %q cut at %v:\nstream: %q %v\nparse:  %q %v", f, text, cuts, gotContent, gotCalls, wantContent, wantCalls)
	}
}

// TestStreamMatchesParse checks the Stream contract on every example: cut
// at every single place, byte by byte, and at random places.
func TestStreamMatchesParse(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for f, examples := range streamExamples {
		for _, text := range examples {
			checkStream(t, f, text, nil)
			var each []int
			for i := 1; i < len(text); i++ {
				checkStream(t, f, text, []int{i})
				each = append(each, i)
			}
			checkStream(t, f, text, each)
			for range 50 {
				checkStream(t, f, text, randomCuts(rng, len(text)))
			}
		}
	}
}

// randomCuts is a sorted random set of places to cut a text of n bytes.
func randomCuts(rng *rand.Rand, n int) []int {
	var cuts []int
	for i := 1; i < n; i++ {
		if rng.IntN(4) == 0 {
			cuts = append(cuts, i)
		}
	}
	return cuts
}

// TestStreamHoldsBack checks what comes out before Finish: a Hermes call
// is given at its </tool_call>, content before a tag comes out at once, and
// a Llama3 call is held to the end.
func TestStreamHoldsBack(t *testing.T) {
	s := NewStream(Hermes)
	if c, calls := s.Push("Sure. <tool_"); c != "Sure." || calls != nil {
		t.Fatalf("got %q %v, want the text before the possible tag", c, calls)
	}
	if c, calls := s.Push("call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"</tool_call>\"}}"); c != "" || calls != nil {
		t.Fatalf("got %q %v inside an open block", c, calls)
	}
	c, calls := s.Push("\n</tool_call>")
	if c != "" || len(calls) != 1 || calls[0].Arguments != `{"a":"</tool_call>"}` {
		t.Fatalf("got %q %v at the close tag", c, calls)
	}
	if c, calls := s.Finish(); c != "" || calls != nil {
		t.Fatalf("Finish gave %q %v", c, calls)
	}

	l := NewStream(Llama3)
	if c, _ := l.Push(" {\"name\": \"f\", "); c != "" {
		t.Fatalf("Llama3 gave %q of a possible call", c)
	}
	if c, _ := l.Push(`"parameters": {}}`); c != "" {
		t.Fatalf("Llama3 gave %q of a possible call", c)
	}
	if _, calls := l.Finish(); len(calls) != 1 {
		t.Fatalf("Llama3 Finish gave %v", calls)
	}
	l = NewStream(Llama3)
	if c, _ := l.Push(" The"); c != " The" {
		t.Fatalf("Llama3 held back text %q", c)
	}
}

// FuzzStream holds the Stream contract for any text and any cuts: the
// fuzzer picks the text, the format and the seed of the cuts.
func FuzzStream(f *testing.F) {
	for fm, examples := range streamExamples {
		for _, text := range examples {
			f.Add(uint8(fm), text, uint64(len(text)))
		}
	}
	f.Fuzz(func(t *testing.T, fm uint8, text string, seed uint64) {
		format := Format(fm % 3)
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		checkStream(t, format, text, randomCuts(rng, len(text)))
		checkStream(t, format, text, nil)
	})
}

// longCall is a call whose arguments hold a string of n bytes, in format f.
func longCall(f Format, n int) string {
	obj := `{"name": "f", "arguments": {"s": "` + strings.Repeat(`a\"`, n/3) + `"}}`
	if f == Hermes {
		return "Sure.\n" + openTag + "\n" + obj + "\n" + closeTag
	}
	return obj
}

// pushPieces streams text in pieces of four bytes, about a token each.
func pushPieces(s *Stream, text string) (content string, calls []Call) {
	var b strings.Builder
	for i := 0; i < len(text); i += 4 {
		c, cs := s.Push(text[i:min(i+4, len(text))])
		b.WriteString(c)
		calls = append(calls, cs...)
	}
	c, cs := s.Finish()
	b.WriteString(c)
	return b.String(), append(calls, cs...)
}

// TestStreamReadsOnce holds a long call, streamed a few bytes at a time,
// to work linear in its length: the Hermes block's scanner reads each
// byte of the object once (not once per Push), and the bytes allocated
// are a small multiple of the answer (not the held text again at every
// Push), also for content that is a long run of whitespace (held back in
// case a call follows). Both are counts, not times. A 60 kB call read
// from the start at every Push reads about 450 MB; held with += it
// allocates as much.
func TestStreamReadsOnce(t *testing.T) {
	const n = 60000
	cases := []struct {
		f    Format
		text string
	}{
		{Hermes, longCall(Hermes, n)},
		{Llama3, longCall(Llama3, n)},
		{Generic, longCall(Generic, n)},
		{Hermes, "Let me see." + strings.Repeat(" \n", n/2) + "Done."},
	}
	for _, c := range cases {
		f, text := c.f, c.text
		wantContent, wantCalls := Parse(f, text)
		s := NewStream(f)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		content, calls := pushPieces(s, text)
		runtime.ReadMemStats(&after)
		if content != wantContent || !reflect.DeepEqual(calls, wantCalls) {
			t.Fatalf("%v: stream gave %q %v, Parse %q %v", f, content, len(calls), wantContent, len(wantCalls))
		}
		if f == Hermes && len(wantCalls) > 0 {
			if len(calls) != 1 {
				t.Fatalf("Hermes: %d calls, want 1", len(calls))
			}
			obj := strings.Index(text, "{")
			if got, want := s.block.obj.read, strings.LastIndex(text, "}")+1-obj; got != want {
				t.Errorf("Hermes: the scanner read %d bytes of a %d-byte object", got, want)
			}
		}
		// The answer, the call's arguments twice (decoded and compacted),
		// the Builder's doublings and JSON's scratch: well under 20×.
		if got := after.TotalAlloc - before.TotalAlloc; got > 20*uint64(len(text)) {
			t.Errorf("%v: streaming %d bytes allocated %d bytes", f, len(text), got)
		}
	}
}

// TestStreamSearchesCloseTagOnce: a block that is not a call object ends
// at the first </tool_call>, and a stream searching for it goes on from
// where the last search stopped (a tag split across pieces included)
// instead of from the block's start.
func TestStreamSearchesCloseTagOnce(t *testing.T) {
	body := openTag + " not json " + strings.Repeat("<tool_call", 2000)
	s := NewStream(Hermes)
	var content strings.Builder
	for i := 0; i < len(body); i += 3 {
		c, _ := s.Push(body[i:min(i+3, len(body))])
		content.WriteString(c)
	}
	if want := len(body) - len(closeTag) + 1; s.block.closeFrom != want {
		t.Fatalf("the next search starts at %d, want %d", s.block.closeFrom, want)
	}
	text := body + "</tool_ca" + "ll> after"
	for _, piece := range []string{"</tool_ca", "ll> after"} {
		c, calls := s.Push(piece)
		if calls != nil {
			t.Fatalf("a call out of a block that is not one: %v", calls)
		}
		content.WriteString(c)
	}
	c, _ := s.Finish()
	content.WriteString(c)
	if want, _ := Parse(Hermes, text); content.String() != want {
		t.Fatalf("the stream gave %d bytes of content, Parse %d", content.Len(), len(want))
	}
}
