package jsonschema

import (
	"math"
	"strconv"
	"strings"
)

// maxInt is the largest integer the grammar's integers can spell: like
// llama.cpp's integral-part, at most 16 digits.
const maxInt = 9999999999999999

// intBounds reads minimum/maximum/exclusiveMinimum/exclusiveMaximum of an
// integer schema as an inclusive range, clamped to what 16 digits spell.
func intBounds(s *value, ptr string) (lo, hi int64) {
	lo, hi = -maxInt, maxInt
	bound := func(kw string, round func(float64) float64, adj int64) (int64, bool) {
		v := s.get(kw)
		if v == nil {
			return 0, false
		}
		if v.kind != 'n' {
			fail(at(ptr, kw), kw, "%s must be a number", kw)
		}
		if n, err := strconv.ParseInt(v.num.String(), 10, 64); err == nil {
			return clamp(n + adj), true
		}
		f, err := v.num.Float64()
		if err != nil {
			fail(at(ptr, kw), kw, "%s %s is out of range", kw, v.num)
		}
		f = round(f)
		if math.Abs(f) > maxInt {
			return clamp(int64(math.Copysign(maxInt+1, f))), true
		}
		return clamp(int64(f) + adj), true
	}
	if n, ok := bound("minimum", math.Ceil, 0); ok {
		lo = max(lo, n)
	}
	if n, ok := bound("exclusiveMinimum", math.Floor, 1); ok {
		lo = max(lo, n)
	}
	if n, ok := bound("maximum", math.Floor, 0); ok {
		hi = min(hi, n)
	}
	if n, ok := bound("exclusiveMaximum", math.Ceil, -1); ok {
		hi = min(hi, n)
	}
	if lo > hi {
		fail(ptr, "minimum", "no integer lies between the minimum and the maximum")
	}
	return lo, hi
}

func clamp(n int64) int64 {
	if n > maxInt+1 {
		return maxInt + 1
	}
	if n < -maxInt-1 {
		return -maxInt - 1
	}
	return n
}

// intRange is a GBNF expression for the decimal integers lo..hi (no leading
// zeros, no "-0"), built digit by digit from the bounds' decimal spelling.
func intRange(lo, hi int64) string {
	switch {
	case hi < 0:
		return `"-" (` + natRange(-hi, -lo) + ")"
	case lo < 0:
		return `"-" (` + natRange(1, -lo) + ") | " + natRange(0, hi)
	}
	return natRange(lo, hi)
}

// natRange covers lo..hi (0 <= lo <= hi) one digit count at a time.
func natRange(lo, hi int64) string {
	var parts []string
	dl, dh := len(strconv.FormatInt(lo, 10)), len(strconv.FormatInt(hi, 10))
	for d := dl; d <= dh; d++ {
		a, b := lo, hi
		if d > 1 {
			a = max(a, pow10(d-1))
		}
		b = min(b, pow10(d)-1)
		parts = append(parts, sameLength(strconv.FormatInt(a, 10), strconv.FormatInt(b, 10)))
	}
	return strings.Join(parts, " | ")
}

func pow10(n int) int64 {
	p := int64(1)
	for ; n > 0; n-- {
		p *= 10
	}
	return p
}

func digitClass(a, b byte) string {
	if a == b {
		return "[" + string(a) + "]"
	}
	return "[" + string(a) + "-" + string(b) + "]"
}

func anyDigits(n int) string {
	if n == 1 {
		return "[0-9]"
	}
	return "[0-9]{" + strconv.Itoa(n) + "}"
}

// sameLength covers the numbers spelled a..b, both of the same length.
func sameLength(a, b string) string {
	if len(a) == 1 {
		return digitClass(a[0], b[0])
	}
	if a[0] == b[0] {
		return `"` + a[:1] + `" (` + sameLength(a[1:], b[1:]) + ")"
	}
	n := len(a) - 1
	zeros, nines := strings.Repeat("0", n), strings.Repeat("9", n)
	if a[1:] == zeros && b[1:] == nines {
		return digitClass(a[0], b[0]) + " " + anyDigits(n)
	}
	var alts []string
	from, to := a[0], b[0]
	if a[1:] != zeros {
		alts = append(alts, `"`+a[:1]+`" (`+sameLength(a[1:], nines)+")")
		from++
	}
	if b[1:] != nines {
		to--
	}
	if from <= to {
		alts = append(alts, digitClass(from, to)+" "+anyDigits(n))
	}
	if b[1:] != nines {
		alts = append(alts, `"`+b[:1]+`" (`+sameLength(zeros, b[1:])+")")
	}
	return strings.Join(alts, " | ")
}
