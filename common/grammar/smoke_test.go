package grammar

import (
	"os"
	"testing"
)

func TestSmokeJSON(t *testing.T) {
	src, _ := os.ReadFile("testdata/json.gbnf")
	g, err := Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`{"a": [1, 2.5e3, "x\u00e9", true, null]}`, `"héllo"`, `[]`, ` 0 `} {
		m := g.NewMatcher()
		if !m.Accept([]byte(s)) || !m.CanEnd() {
			t.Errorf("%q refused", s)
		}
	}
	for _, s := range []string{`{"a" 1}`, `01`, `[1,]`} {
		m := g.NewMatcher()
		if m.Accept([]byte(s)) && m.CanEnd() {
			t.Errorf("%q accepted", s)
		}
	}
}
