package main

import (
	"strconv"
	"strings"

	"kvlab/kernels/cpu"
)

// What a side's server computes with, read from its extra arguments over
// each server's defaults: the KV cache dtype, for the decode bound, and
// whether bf16 weights meet bf16 activations, for the prefill bound.

// flagValue is the value of the last of names in args ("-x v", "--x v",
// "-x=v"; the flag packages of both servers let the last one win), or "".
func flagValue(args []string, names ...string) string {
	v := ""
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		key, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		for _, n := range names {
			if key != n {
				continue
			}
			switch {
			case hasVal:
				v = val
			case i+1 < len(args):
				v = args[i+1]
			}
		}
	}
	return v
}

// kvDType is the KV cache dtype sd's server runs with: serve's default
// f32 and llama-server's f16, unless its extra arguments say otherwise.
func kvDType(sd side) string {
	if sd.server == serverServe {
		if v := flagValue(sd.extra, "kv-cache-dtype", "ctk"); v != "" {
			return v
		}
		return "f32"
	}
	if v := flagValue(sd.extra, "ctk", "cache-type-k"); v != "" {
		return v
	}
	return "f16"
}

// serveBF16Dot reports whether serve, given extra arguments, multiplies
// bf16 weights by bf16 activations on a CPU that has (native) or lacks
// the bf16 dot product: -bf16-dot's default, auto, follows the CPU;
// -bf16-dot alone or =true is on, =false off; the last one wins.
func serveBF16Dot(extra []string, native bool) bool {
	on := native
	for _, a := range extra {
		key, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if key != "bf16-dot" || !strings.HasPrefix(a, "-") {
			continue
		}
		switch {
		case !hasVal || val == "on":
			on = true
		case val == "off":
			on = false
		case val == "auto":
			on = native
		default:
			if b, err := strconv.ParseBool(val); err == nil {
				on = b
			}
		}
	}
	return on
}

// multipliesInBF16 reports whether sd's server multiplies the weights of a
// dtype checkpoint by bf16 activations: llama-server always does on bf16
// weights, serve as serveBF16Dot says.
func multipliesInBF16(sd side, dtype string, native bool) bool {
	if dtype != "bf16" {
		return false
	}
	return sd.server == serverLlama || serveBF16Dot(sd.extra, native)
}

// productsNote is the markdown's sentence on what bf16 checkpoints'
// products are, row by row, on this CPU.
func productsNote(sides []side) string {
	var parts []string
	for _, sd := range sides {
		act := "float32"
		if multipliesInBF16(sd, "bf16", cpu.BF16DotNative()) {
			act = "bf16"
		}
		parts = append(parts, sd.name+" by "+act+" activations")
	}
	why := "this CPU lacks"
	if cpu.BF16DotNative() {
		why = "this CPU has"
	}
	return "bf16 weights are multiplied: " + strings.Join(parts, ", ") + " (serve's -bf16-dot is auto by default, on where the CPU has AVX512-BF16; " + why + " it)."
}
