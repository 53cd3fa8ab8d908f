package grammar_test

import (
	"fmt"

	"kvlab/common/grammar"
)

// A yes/no answer: the mask allows only the tokens that can continue it,
// and generation may stop once the matcher can end.
func Example() {
	g, err := grammar.Parse(`root ::= ("yes" | "no") "."?`)
	if err != nil {
		panic(err)
	}
	vocab := [][]byte{[]byte("y"), []byte("es"), []byte("no"), []byte("n"), []byte("."), []byte("maybe"), nil}
	v := grammar.NewVocab(vocab)
	m := g.NewMatcher()
	show := func() {
		mask := m.Allowed(v, nil)
		fmt.Print("allowed:")
		for id, p := range vocab {
			if mask[id/64]>>(id%64)&1 == 1 {
				fmt.Printf(" %q", p)
			}
		}
		fmt.Println(" can end:", m.CanEnd())
	}
	show()
	m.Accept([]byte("y"))
	show()
	m.Accept([]byte("es"))
	show()
	fmt.Println(m.Accept([]byte("maybe")))

	_, err = grammar.Parse("root ::= answer\n")
	fmt.Println(err)
	// Output:
	// allowed: "y" "no" "n" can end: false
	// allowed: "es" can end: false
	// allowed: "." can end: true
	// false
	// line 1, column 10: undefined rule "answer"
}
