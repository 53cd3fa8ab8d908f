package jsonschema

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"

	"kvlab/common/grammar"
)

// nodes lists every value inside v, v first, with a pointer to the slot
// holding it (nil for v itself).
func nodes(v *value, slot **value, out *[]nodeRef) {
	*out = append(*out, nodeRef{v, slot})
	for i := range v.vals {
		nodes(v.vals[i], &v.vals[i], out)
	}
}

type nodeRef struct {
	v    *value
	slot **value
}

// mutateValue changes one random value of a parsed document while keeping
// it valid JSON with members in their order: a scalar of another type, a
// number moved by one, a string lengthened or emptied, a member or item
// dropped or duplicated, a member added.
func mutateValue(doc *value, rng *rand.Rand) *value {
	var all []nodeRef
	root := doc
	nodes(root, &root, &all)
	n := all[rng.IntN(len(all))]
	scalars := []*value{{kind: 'z'}, {kind: 'b', truth: true}, {kind: 's', str: "x"}, {kind: 'n', num: "7"}, {kind: 'n', num: "-2.5"}, {kind: 'o'}, {kind: 'a'}}
	switch v := n.v; rng.IntN(3) {
	case 0:
		*n.slot = scalars[rng.IntN(len(scalars))]
	default:
		switch v.kind {
		case 'n':
			f, _ := strconv.ParseFloat(v.num.String(), 64)
			d := 1.0
			if rng.IntN(2) == 0 {
				d = -1
			}
			v.num = numberOf(f + d)
		case 's':
			if rng.IntN(2) == 0 || v.str == "" {
				v.str += "Zq9"
			} else {
				v.str = ""
			}
		case 'o':
			if len(v.keys) > 0 && rng.IntN(2) == 0 {
				i := rng.IntN(len(v.keys))
				v.keys = append(v.keys[:i:i], v.keys[i+1:]...)
				v.vals = append(v.vals[:i:i], v.vals[i+1:]...)
			} else {
				v.keys = append(v.keys, "zz")
				v.vals = append(v.vals, scalars[rng.IntN(len(scalars))])
			}
		case 'a':
			if len(v.vals) > 0 && rng.IntN(2) == 0 {
				i := rng.IntN(len(v.vals))
				v.vals = append(v.vals[:i:i], v.vals[i+1:]...)
			} else if len(v.vals) > 0 {
				v.vals = append(v.vals, v.vals[rng.IntN(len(v.vals))])
			} else {
				v.vals = append(v.vals, scalars[rng.IntN(len(scalars))])
			}
		default:
			*n.slot = scalars[rng.IntN(len(scalars))]
		}
	}
	return root
}

func numberOf(f float64) json.Number { return json.Number(strconv.FormatFloat(f, 'g', -1, 64)) }

// TestValueMutations: documents from random walks, changed at one value
// (still JSON, members in order, compact spacing): whenever the grammar
// accepts such a document the validator accepts it too, and many are
// refused by both.
func TestValueMutations(t *testing.T) {
	tried, bothRefused, bothAccepted := 0, 0, 0
	for ci, tc := range roundTrip {
		src, err := ToGBNF([]byte(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		g, err := grammar.Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		val := compileValidator(t, tc.schema)
		rng := rand.New(rand.NewPCG(uint64(ci), 11))
		for range 20 {
			doc, ok := walk(t, g, rng)
			if !ok {
				continue
			}
			for range 5 {
				v, err := parseValue(doc)
				if err != nil {
					t.Fatalf("%s: walked %q is not JSON: %v", tc.name, doc, err)
				}
				mut := []byte(mutateValue(v, rng).compact())
				tried++
				valid, verr := validates(val, mut)
				accepted := matches(g, mut)
				switch {
				case accepted && !valid:
					t.Errorf("%s: %s (from %q): the grammar accepts it, the validator refuses it: %v", tc.name, mut, doc, verr)
				case accepted:
					bothAccepted++
				case !valid:
					bothRefused++
				}
			}
		}
	}
	t.Logf("%d value mutations: %d refused by both, %d accepted by both", tried, bothRefused, bothAccepted)
	if bothRefused < tried/4 || bothAccepted == 0 {
		t.Errorf("%d value mutations, %d refused by both, %d accepted by both: too few to mean anything", tried, bothRefused, bothAccepted)
	}
}
