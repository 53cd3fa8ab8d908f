package toolcall

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"kvlab/common/tokenizer"
)

// templateOf reads chat_template from a tokenizer_config.json.
func templateOf(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.ChatTemplate == "" {
		t.Fatalf("%s has no chat_template", path)
	}
	return cfg.ChatTemplate
}

// TestDetect reads the format off real templates. The Llama-3 template in
// the tokenizer's testdata is the original Llama-3 one, which renders no
// tools, so it is Generic; testdata/llama3-tools.jinja is a short template
// written the way the Llama-3.1+ templates render tools (an ipython
// environment, JSON with "parameters"), for Llama3.
func TestDetect(t *testing.T) {
	llama31, err := os.ReadFile("testdata/llama3-tools.jinja")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, src string
		want      Format
	}{
		{"qwen3 tokenizer_config.json", templateOf(t, "../tokenizer/testdata/qwen3/tokenizer_config.json"), Hermes},
		{"llama3 tokenizer_config.json (no tools)", templateOf(t, "../tokenizer/testdata/llama3/tokenizer_config.json"), Generic},
		{"llama3-tools.jinja", string(llama31), Llama3},
		{"python tag alone", "{{ '<|python_tag|>' }}", Llama3},
		{"tokenizer.Llama3ChatTemplate", tokenizer.Llama3ChatTemplate, Generic},
		{"tokenizer.Gemma3ChatTemplate", tokenizer.Gemma3ChatTemplate, Generic},
		{"empty", "", Generic},
	}
	for _, c := range cases {
		if got := Detect(c.src); got != c.want {
			t.Errorf("%s: Detect = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFormatString(t *testing.T) {
	for f, want := range map[Format]string{Generic: "Generic", Llama3: "Llama3", Hermes: "Hermes", Format(7): "Format(7)"} {
		if got := f.String(); got != want {
			t.Errorf("%d: %q, want %q", int(f), got, want)
		}
	}
}

// TestLlama3TemplateRenders renders testdata/llama3-tools.jinja with the
// tokenizer's Jinja engine, so the template Detect reads is a working one:
// it lists the tool and asks for the JSON that Parse reads as Llama3.
func TestLlama3TemplateRenders(t *testing.T) {
	src, err := os.ReadFile("testdata/llama3-tools.jinja")
	if err != nil {
		t.Fatal(err)
	}
	vocab, err := os.ReadFile("../tokenizer/testdata/llama3/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := json.Marshal(map[string]string{"chat_template": string(src), "bos_token": "<|begin_of_text|>"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Parse(vocab, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var tools []any
	if err := json.Unmarshal([]byte(`[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]`), &tools); err != nil {
		t.Fatal(err)
	}
	out, err := tok.RenderChat([]tokenizer.Message{{Role: "user", Content: "Weather in Paris?"}}, tokenizer.ChatOptions{AddGenerationPrompt: true, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name": "get_weather"`, `"parameters": object of argument names`, "<|start_header_id|>assistant<|end_header_id|>\n\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered prompt lacks %q:\n%s", want, out)
		}
	}
}
