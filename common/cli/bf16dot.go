package cli

import (
	"fmt"
	"strconv"
)

// bf16DotMode is the -bf16-dot flag: whether bf16 weights multiply
// activations rounded to bf16 (kernels/cpu/bf16dot.go) or float32 ones
// (kernels/cpu/dot.go).
//
// The zero value is auto: bf16 products wherever the CPU multiplies bf16
// pairs in one instruction, as llama.cpp does by default, so that serve
// as shipped runs a bf16 checkpoint at the speed the machine has. The
// flag is a boolean on the command line, so "-bf16-dot" alone still means
// on, and -bf16-dot=false is the float32 path the reference comparisons
// use.
type bf16DotMode int

const (
	bf16DotAuto bf16DotMode = iota
	bf16DotOn
	bf16DotOff
)

// String returns the mode as the flag spells it.
func (m *bf16DotMode) String() string {
	switch *m {
	case bf16DotOn:
		return "true"
	case bf16DotOff:
		return "false"
	}
	return "auto"
}

// Set parses auto, on or off, or any value strconv.ParseBool reads.
func (m *bf16DotMode) Set(s string) error {
	switch s {
	case "auto":
		*m = bf16DotAuto
		return nil
	case "on":
		*m = bf16DotOn
		return nil
	case "off":
		*m = bf16DotOff
		return nil
	}
	on, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want auto, true (on) or false (off)")
	}
	if on {
		*m = bf16DotOn
	} else {
		*m = bf16DotOff
	}
	return nil
}

// IsBoolFlag lets "-bf16-dot" stand alone for "-bf16-dot=true", as it
// did when the flag was a plain boolean.
func (m *bf16DotMode) IsBoolFlag() bool { return true }

// decide says whether the backend multiplies in bf16, given the -device
// flag, whether the kernel set has the bf16 dot product (native) and its
// name (set, for the error). Auto follows the CPU and never fails; an
// explicit on fails where it cannot run at full speed, since the Go twin
// gives the same bits many times slower than float32 products.
func (m bf16DotMode) decide(device string, native bool, set string) (bool, error) {
	switch m {
	case bf16DotOff:
		return false, nil
	case bf16DotOn:
		if device != "cpu" {
			return false, fmt.Errorf("-bf16-dot: bf16 products are the cpu backend's; drop the flag or use -device cpu")
		}
		if !native {
			return false, fmt.Errorf("-bf16-dot: the %s kernel set has no bf16 dot product (it needs AVX512-BF16), and bf16 products in Go would be many times slower than without the flag; drop it", set)
		}
		return true, nil
	}
	return device == "cpu" && native, nil
}
