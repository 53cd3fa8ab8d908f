package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// servedPrompt is what serve's /apply-template renders for one user
// message.
func servedPrompt(t *testing.T, url string) string {
	t.Helper()
	resp, err := testClient.Post(url+"/apply-template", "application/json", strings.NewReader(`{"messages": [{"role": "user", "content": "Hi there"}]}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct{ Prompt string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return out.Prompt
}

func TestServeChatTemplateFlags(t *testing.T) {
	dir := smallModel(t, "llama")
	file := filepath.Join(t.TempDir(), "t.jinja")
	require.NoError(t, os.WriteFile(file, []byte(`{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{% if add_generation_prompt %}[bot{% if not enable_thinking %}, no thinking{% endif %}]{% endif %}`), 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-chat-template", "command-r"}, "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
		{[]string{"-chat-template", "chatml", "-no-jinja"}, "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"},
		{[]string{"-chat-template", "{{ messages[0].content | upper }}"}, "HI THERE"},
		{[]string{"-chat-template-file", file, "-jinja"}, "[user:Hi there][bot]"},
		{[]string{"-chat-template-file", file, "-reasoning", "off"}, "[user:Hi there][bot, no thinking]"},
		{[]string{"-chat-template-file", file, "-chat-template-kwargs", `{"enable_thinking": false}`}, "[user:Hi there][bot, no thinking]"},
	} {
		url, stop, done, log := startServe(t, cachedVariant, append([]string{"-model", dir}, c.args...)...)
		assert.Equal(t, c.want, servedPrompt(t, url), "%v", c.args)
		stop()
		require.NoError(t, <-done, log.String())
	}
}

func TestServeVerboseShowsTheChatPrompt(t *testing.T) {
	dir := smallModel(t, "llama")
	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-chat-template", "chatml", "-verbose")
	resp, err := testClient.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages": [{"role": "user", "content": "Hi there"}], "max_tokens": 1}`))
	require.NoError(t, err)
	var out struct {
		Verbose struct{ Prompt string } `json:"__verbose"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	resp.Body.Close()
	assert.True(t, strings.HasSuffix(out.Verbose.Prompt, "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"), out.Verbose.Prompt)
	stop()
	require.NoError(t, <-done, log.String())
}

func TestServeRefusesABadChatTemplateAtStartUp(t *testing.T) {
	dir := smallModel(t, "llama")
	bad := filepath.Join(t.TempDir(), "bad.jinja")
	require.NoError(t, os.WriteFile(bad, []byte(`{% for m in messages %}{{ m.content }}`), 0o644))
	failing := filepath.Join(t.TempDir(), "failing.jinja")
	require.NoError(t, os.WriteFile(failing, []byte(`{{ raise_exception("this template wants a system message") }}`), 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-chat-template-file", bad}, "-chat-template-file " + bad + ": tokenizer: parsing chat template"},
		{[]string{"-chat-template-file", failing}, "this template wants a system message"},
		{[]string{"-chat-template-file", filepath.Join(t.TempDir(), "absent.jinja")}, "no such file"},
		{[]string{"-chat-template", "{{ x"}, "-chat-template (a Jinja template): tokenizer: parsing chat template"},
		{[]string{"-chat-template", "{{ x }}", "-no-jinja"}, "not a built-in name"},
		{[]string{"-chat-template", "chatml", "-chat-template-file", bad}, "not both"},
		{[]string{"-reasoning-format", "deepseek"}, `-reasoning-format "deepseek" is not supported`},
		{[]string{"-reasoning-budget", "10"}, "-reasoning-budget 10 is not supported"},
		{[]string{"-reasoning", "maybe"}, "-reasoning is on, off or auto"},
		{[]string{"-chat-template-kwargs", "[1]"}, "-chat-template-kwargs must be a JSON object"},
	} {
		// A server that starts despite the flag stops after the deadline
		// with no error, which fails the test instead of hanging it.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := Serve(ctx, cachedVariant, append([]string{"-model", dir, "-port", "0"}, c.args...), nil, &syncBuffer{})
		cancel()
		require.Error(t, err, "%v", c.args)
		assert.Contains(t, err.Error(), c.want, "%v", c.args)
	}
}
