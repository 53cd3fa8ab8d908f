package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// SetChatTemplate replaces the model's chat template with source (a Jinja
// template: serve's -chat-template or -chat-template-file), so that every
// later render uses it. The template is compiled and rendered once with a
// user message now, so one this package cannot render fails here, at
// start-up, with the construct named, instead of on the first chat
// request. Defaults set with SetChatTemplateVars are kept.
func (t *Tokenizer) SetChatTemplate(source string) error {
	c := &chatTemplate{source: source}
	if t.chat != nil {
		c.vars = t.chat.vars
	}
	if _, err := c.compile(); err != nil {
		return err
	}
	old := t.chat
	t.chat = c
	if _, err := t.ApplyChatTemplate([]Message{{Role: "user", Content: "test"}}, true); err != nil {
		t.chat = old
		return err
	}
	return nil
}

// SetChatTemplateVars sets default values of further template variables
// (enable_thinking, serve's -chat-template-kwargs), which a request's
// ChatOptions.Vars override. It does nothing when there is no template.
func (t *Tokenizer) SetChatTemplateVars(vars map[string]any) {
	if t.chat == nil {
		return
	}
	m := make(map[string]any, len(t.chat.vars)+len(vars))
	for k, v := range t.chat.vars {
		m[k] = v
	}
	for k, v := range vars {
		m[k] = v
	}
	t.chat.vars = m
}

// chatHelpers are the functions chat templates call beyond Jinja's own,
// as transformers and llama.cpp's template engine provide them:
// raise_exception (the template refuses the conversation) and
// strftime_now, plus today's date as llama-server provides it to every
// template: date_string ("01 Dec 2026", which Llama 3.x templates print in
// the system message) and datetime ("Dec 01 2026").
func chatHelpers(now time.Time) map[string]any {
	return map[string]any{
		"date_string": strftime(now, "%d %b %Y"),
		"datetime":    strftime(now, "%b %d %Y"),
		"raise_exception": func(msg string) (string, error) {
			return "", fmt.Errorf("chat template: %s", msg)
		},
		"strftime_now": func(format string) string { return strftime(now, format) },
	}
}

// strftime formats t as Python's time.strftime does format, for the
// directives chat templates use; an unknown directive is written as is.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		switch format[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}

// chatList is a list a template indexes, with Python's negative indexes:
// gonja (v2.9) finds no item at index -n of a list of n, so
// messages[-1] of a one-message chat, which templates write to read the
// last turn, would be none.
type chatList []map[string]any

// GetItem is gonja's exec.ItemGetter: item i, counted from the end when
// negative; a key that is not an int finds nothing, as for any list.
func (l chatList) GetItem(key any) (*exec.Value, bool) {
	i, ok := key.(int)
	if !ok {
		return exec.AsValue(nil), false
	}
	if i < 0 {
		i += len(l)
	}
	if i < 0 || i >= len(l) {
		return exec.AsValue(nil), false
	}
	return exec.AsValue(l[i]), true
}
