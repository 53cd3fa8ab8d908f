package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Message is one turn of a chat: Role is "system", "user" or "assistant"
// (templates may know others, such as "tool").
type Message struct {
	Role, Content string
	// ToolCalls are an assistant turn's calls as decoded JSON, OpenAI's
	// [{"id", "type", "function": {"name", "arguments"}}] with each
	// arguments an object, not the JSON text of one: templates write it
	// with "| tojson" and read its keys.
	ToolCalls []any
	// ToolCallID and Name are a tool turn's: the call it answers and the
	// function that answered.
	ToolCallID, Name string
}

// templateMessage is m as a template reads it; the tool fields are there
// only when set, as templates test them with "is defined" or for
// truthiness.
func templateMessage(m Message) map[string]any {
	out := map[string]any{"role": m.Role, "content": m.Content}
	if m.ToolCalls != nil {
		out["tool_calls"] = m.ToolCalls
	}
	if m.ToolCallID != "" {
		out["tool_call_id"] = m.ToolCallID
	}
	if m.Name != "" {
		out["name"] = m.Name
	}
	return out
}

// ErrNoChatTemplate is returned by ApplyChatTemplate when the tokenizer has
// no chat template (a base model, or no tokenizer_config.json).
var ErrNoChatTemplate = errors.New("tokenizer: no chat_template in " + ConfigFile + " or " + ChatTemplateFile)

// chatTemplate is a Jinja chat template, compiled on first use so a
// template the engine cannot parse fails the chat request, not Load.
type chatTemplate struct {
	source string
	vars   map[string]any // defaults of further variables (SetChatTemplateVars)

	once sync.Once
	tmpl *exec.Template
	err  error
	mu   sync.Mutex // gonja does not promise concurrent renders are safe
}

// parseChatTemplate reads chat_template: a string, or a list of named
// templates of which "default" (else the first) is used.
func parseChatTemplate(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("chat_template is neither a string nor a list of {name, template}: %w", err)
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	if len(named) > 0 {
		return named[0].Template, nil
	}
	return "", nil
}

// rootOnlyLoader serves the template itself and nothing else, so a
// template from a downloaded checkpoint cannot {% include %} local files.
type rootOnlyLoader struct{ src []byte }

const rootName = "chat_template"

func (l rootOnlyLoader) Read(path string) (io.Reader, error) {
	if path != rootName {
		return nil, fmt.Errorf("chat template may not load %q", path)
	}
	return bytes.NewReader(l.src), nil
}
func (l rootOnlyLoader) Resolve(path string) (string, error)    { return path, nil }
func (l rootOnlyLoader) Inherit(string) (loaders.Loader, error) { return l, nil }

func (c *chatTemplate) compile() (*exec.Template, error) {
	c.once.Do(func() {
		// transformers renders chat templates with trim_blocks and
		// lstrip_blocks on; templates are written for that.
		cfg := config.New()
		cfg.TrimBlocks, cfg.LeftStripBlocks = true, true
		c.tmpl, c.err = exec.NewTemplate(rootName, cfg, rootOnlyLoader{[]byte(c.source)}, gonja.DefaultEnvironment)
		if c.err != nil {
			// A parenthesized inline if (Gemma-3's template has one) is
			// beyond gonja's parser; an equivalent spelling is not.
			if src := rewriteInlineIf(c.source); src != c.source {
				if tmpl, err := exec.NewTemplate(rootName, cfg, rootOnlyLoader{[]byte(src)}, gonja.DefaultEnvironment); err == nil {
					c.tmpl, c.err = tmpl, nil
				}
			}
		}
		if c.err != nil {
			// gonja quotes the whole source in its message; the line and
			// column it gives after it are what a reader needs.
			msg := strings.Replace(c.err.Error(), " '"+c.source+"'", "", 1)
			c.err = fmt.Errorf("tokenizer: parsing chat template: %s", msg)
		}
	})
	return c.tmpl, c.err
}

// ChatTemplate returns the Jinja source of the chat template, "" when
// there is none (llama-server's /props shows it).
func (t *Tokenizer) ChatTemplate() string {
	if t.chat == nil {
		return ""
	}
	return t.chat.source
}

// HasChatTemplate reports whether ApplyChatTemplate has a template to render.
func (t *Tokenizer) HasChatTemplate() bool { return t.chat != nil }

// ChatOptions are what a chat is rendered with beside its messages.
type ChatOptions struct {
	// AddGenerationPrompt: end with the header that starts the assistant's
	// turn.
	AddGenerationPrompt bool
	// Tools is the request's tools as decoded JSON; nil renders as none,
	// which templates test with "tools is not none".
	Tools []any
	// Vars are further template variables (a request's
	// chat_template_kwargs, enable_thinking); they override the defaults
	// set with SetChatTemplateVars, and never messages, tools or
	// add_generation_prompt.
	Vars map[string]any
}

// ApplyChatTemplate renders the chat template with messages, bos_token,
// eos_token and add_generation_prompt (true: end with the header that
// starts the assistant's turn), plus the helpers of chatHelpers. It returns
// ErrNoChatTemplate when there is no template.
//
// The result is text, typically starting with the BOS token written out;
// encode it with Encode, which turns the written-out specials into ids and
// adds no second BOS.
func (t *Tokenizer) ApplyChatTemplate(msgs []Message, addGenerationPrompt bool) (string, error) {
	return t.RenderChat(msgs, ChatOptions{AddGenerationPrompt: addGenerationPrompt})
}

// RenderChat is ApplyChatTemplate with tools and further variables.
func (t *Tokenizer) RenderChat(msgs []Message, o ChatOptions) (string, error) {
	if t.chat == nil {
		return "", ErrNoChatTemplate
	}
	tmpl, err := t.chat.compile()
	if err != nil {
		return "", err
	}
	list := make(chatList, len(msgs))
	for i, m := range msgs {
		list[i] = templateMessage(m)
	}
	vars := chatHelpers(time.Now())
	for k, v := range t.chat.vars {
		vars[k] = v
	}
	for k, v := range o.Vars {
		vars[k] = v
	}
	vars["messages"] = list
	vars["add_generation_prompt"] = o.AddGenerationPrompt
	vars["bos_token"] = t.bosText
	vars["eos_token"] = t.eosText
	vars["tools"] = nil
	if o.Tools != nil {
		vars["tools"] = o.Tools
	}
	t.chat.mu.Lock()
	defer t.chat.mu.Unlock()
	out, err := tmpl.ExecuteToString(exec.NewContext(vars))
	if err != nil {
		return "", fmt.Errorf("tokenizer: rendering chat template: %w", err)
	}
	return out, nil
}

// EncodeChat renders msgs with the chat template and encodes the result
// with Encode: the prompt ids for a chat request.
func (t *Tokenizer) EncodeChat(msgs []Message, addGenerationPrompt bool) ([]int32, error) {
	text, err := t.ApplyChatTemplate(msgs, addGenerationPrompt)
	if err != nil {
		return nil, err
	}
	return t.Encode(text), nil
}
