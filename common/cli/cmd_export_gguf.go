package cli

import (
	"fmt"
	"io"

	"kvlab/common/model/gguf"
)

// runExportGGUF writes a checkpoint as a GGUF file for llama.cpp (or
// ollama): the same weights under llama.cpp's names and layout, with the
// model's vocabulary (package gguf: Llama, Qwen3 and Gemma-3).
func runExportGGUF(v Variant, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(v, "export-gguf", stderr)
	dir := fs.String("model", "", "model directory (HF config.json + safetensors + tokenizer.json); empty: the built-in synthetic model, written on first use")
	out := fs.String("out", "", "GGUF file to write (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		fmt.Fprintln(stderr, "-out: required (the .gguf file to write)")
		return errUsage
	}
	if *dir == "" {
		d, err := DefaultModelDir()
		if err != nil {
			return err
		}
		*dir = d
	}
	s, err := gguf.ExportFile(*dir, *out)
	if err != nil {
		return err
	}
	types := map[gguf.TensorType]int{}
	for _, t := range s.Tensors {
		types[t.Type]++
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %d tensors (%d F32, %d BF16, %d F16), vocab %d (pre-tokenizer %s), %d bytes\n",
		*out, s.Arch, len(s.Tensors), types[gguf.F32], types[gguf.BF16], types[gguf.F16], s.Vocab, s.Pre, s.Bytes)
	return nil
}
