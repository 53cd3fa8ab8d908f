package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"kvlab/common/tokenizer"
)

// chatTemplateFlags are serve's flags about the chat template, named as
// llama-server names them. serve renders every template with its one
// Jinja engine (gonja, common/tokenizer/chat.go), so -jinja is the
// default and -no-jinja only narrows what -chat-template takes.
type chatTemplateFlags struct {
	template, file, kwargs     string
	reasoning, reasoningFormat string
	reasoningBudget            int
	jinja, noJinja             bool
	verbose                    bool // server.Options.Verbose
}

func (c *chatTemplateFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.template, "chat-template", "", "the chat template instead of the model's: a built-in name ("+strings.Join(tokenizer.BuiltinChatTemplateNames(), ", ")+") or a Jinja template (llama-server's flag)")
	fs.StringVar(&c.file, "chat-template-file", "", "read the chat template, a Jinja file, from this path instead of the model's")
	fs.StringVar(&c.kwargs, "chat-template-kwargs", "", `further chat template variables for every request, a JSON object such as {"enable_thinking": false}; a request's chat_template_kwargs override them`)
	fs.BoolVar(&c.jinja, "jinja", true, "render chat templates as Jinja (always so here; accepted for llama-server's command lines)")
	fs.BoolVar(&c.noJinja, "no-jinja", false, "take only a built-in name for -chat-template and refuse -chat-template-file (llama-server's legacy formats); templates still render with the Jinja engine")
	fs.StringVar(&c.reasoning, "reasoning", "auto", "on, off or auto: the enable_thinking the chat template sees (off: false; on and auto: true), as llama-server's --reasoning")
	fs.StringVar(&c.reasoningFormat, "reasoning-format", "none", "none: thoughts stay in the message content; the formats that split them out (deepseek, auto) are not built here")
	fs.IntVar(&c.reasoningBudget, "reasoning-budget", -1, "-1 only: no budget on thinking tokens (a budget is not built here)")
	fs.BoolVar(&c.verbose, "verbose", false, `put llama-server's "__verbose" with the rendered chat prompt in every chat answer (a request asks for it with "verbose": true)`)
	fs.BoolVar(&c.verbose, "v", false, "short for -verbose")
}

// apply checks the flags and sets the template and its default variables
// on tok. A template that does not render fails here, at start-up.
func (c *chatTemplateFlags) apply(tok *tokenizer.Tokenizer) error {
	switch c.reasoningFormat {
	case "none":
	default:
		return fmt.Errorf("-reasoning-format %q is not supported: serve does not split thoughts out of the content (reasoning_content); use none", c.reasoningFormat)
	}
	if c.reasoningBudget != -1 {
		return fmt.Errorf("-reasoning-budget %d is not supported: a budget on thinking tokens is not built here; use -1", c.reasoningBudget)
	}
	vars := map[string]any{}
	if c.kwargs != "" {
		if err := json.Unmarshal([]byte(c.kwargs), &vars); err != nil || vars == nil {
			return fmt.Errorf("-chat-template-kwargs must be a JSON object: %q", c.kwargs)
		}
	}
	switch c.reasoning {
	case "on", "off":
		vars["enable_thinking"] = c.reasoning == "on"
	case "auto":
		if _, set := vars["enable_thinking"]; !set {
			vars["enable_thinking"] = true
		}
	default:
		return fmt.Errorf("-reasoning is on, off or auto, not %q", c.reasoning)
	}
	if v, set := vars["enable_thinking"]; set {
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("-chat-template-kwargs: enable_thinking must be a boolean, have %v", v)
		}
	}
	src, from, err := c.source()
	if err != nil {
		return err
	}
	if tok == nil {
		if src != "" {
			return fmt.Errorf("%s needs a tokenizer (the model has no tokenizer.json): a chat prompt is text", from)
		}
		return nil
	}
	if src != "" {
		if err := tok.SetChatTemplate(src); err != nil {
			return fmt.Errorf("%s: %w", from, err)
		}
	}
	tok.SetChatTemplateVars(vars)
	return nil
}

// source is the template the flags give, "" for the model's own, and the
// flag it came from for errors.
func (c *chatTemplateFlags) source() (src, from string, err error) {
	c.noJinja = c.noJinja || !c.jinja // -jinja=false is -no-jinja
	switch {
	case c.template != "" && c.file != "":
		return "", "", fmt.Errorf("give -chat-template or -chat-template-file, not both")
	case c.file != "":
		if c.noJinja {
			return "", "", fmt.Errorf("-chat-template-file is a Jinja template, and -no-jinja takes only a built-in -chat-template name")
		}
		b, err := os.ReadFile(c.file)
		if err != nil {
			return "", "", fmt.Errorf("-chat-template-file: %w", err)
		}
		return string(b), "-chat-template-file " + c.file, nil
	case c.template != "":
		if s, ok := tokenizer.BuiltinChatTemplate(c.template); ok {
			return s, "-chat-template " + c.template, nil
		}
		if c.noJinja {
			return "", "", fmt.Errorf("-chat-template %q is not a built-in name (%s), and -no-jinja takes no Jinja template", c.template, strings.Join(tokenizer.BuiltinChatTemplateNames(), ", "))
		}
		return c.template, "-chat-template (a Jinja template)", nil
	}
	return "", "", nil
}
