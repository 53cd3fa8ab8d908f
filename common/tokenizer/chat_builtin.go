package tokenizer

import "sort"

// builtinChatTemplates are chat formats by the names llama-server's
// --chat-template accepts for them, each written here as a Jinja template
// that renders what llama.cpp's built-in formatter of that name writes
// (serve's -chat-template NAME). Rendered with trim_blocks and
// lstrip_blocks, as every template is.
var builtinChatTemplates = map[string]string{
	"chatml": `{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`,

	"llama3": `{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>

{{ m.content | trim }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}`,

	"command-r": `{% for m in messages %}<|START_OF_TURN_TOKEN|>{% if m.role == 'system' %}<|SYSTEM_TOKEN|>{% elif m.role == 'user' %}<|USER_TOKEN|>{% else %}<|CHATBOT_TOKEN|>{% endif %}{{ m.content | trim }}<|END_OF_TURN_TOKEN|>{% endfor %}{% if add_generation_prompt %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>{% endif %}`,

	// Gemma has no system turn: the system text opens the next user turn.
	"gemma": `{% set ns = namespace(system='') %}{% for m in messages %}{% if m.role == 'system' %}{% set ns.system = ns.system + (m.content | trim) %}{% else %}{% set role = 'model' if m.role == 'assistant' else m.role %}<start_of_turn>{{ role }}
{% if ns.system != '' and role != 'model' %}{{ ns.system }}

{% set ns.system = '' %}{% endif %}{{ m.content | trim }}<end_of_turn>
{% endif %}{% endfor %}{% if add_generation_prompt %}<start_of_turn>model
{% endif %}`,

	"phi3": `{% for m in messages %}<|{{ m.role }}|>
{{ m.content }}<|end|>
{% endfor %}{% if add_generation_prompt %}<|assistant|>
{% endif %}`,

	"zephyr": `{% for m in messages %}<|{{ m.role }}|>
{{ m.content }}<|endoftext|>
{% endfor %}{% if add_generation_prompt %}<|assistant|>
{% endif %}`,

	"vicuna": `{% for m in messages %}{% if m.role == 'system' %}{{ m.content }}

{% elif m.role == 'user' %}USER: {{ m.content }}
{% else %}ASSISTANT: {{ m.content }}</s>
{% endif %}{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}`,
}

// BuiltinChatTemplate returns the Jinja source of the built-in chat
// format called name (chatml, llama3, command-r, gemma, phi3, zephyr,
// vicuna), ok false for any other name.
func BuiltinChatTemplate(name string) (source string, ok bool) {
	source, ok = builtinChatTemplates[name]
	return source, ok
}

// BuiltinChatTemplateNames lists the names BuiltinChatTemplate knows, sorted.
func BuiltinChatTemplateNames() []string {
	names := make([]string, 0, len(builtinChatTemplates))
	for n := range builtinChatTemplates {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
