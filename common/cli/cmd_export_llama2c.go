package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"kvlab/common/model/llama2c"
)

// runExportLlama2c writes a Llama checkpoint in the format of llama2.c's
// run.c, with a tokenizer.bin beside it that makes run.c print token ids.
func runExportLlama2c(v Variant, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(v, "export-llama2c", stderr)
	dir := fs.String("model", "", "model directory (HF config.json + safetensors); it must be a Llama with RoPE theta 10000, no RoPE scaling and RMSNorm epsilon 1e-5, as run.c computes (empty: the built-in model, which has Llama 3.2's RoPE and is refused)")
	out := fs.String("out", "", "checkpoint file to write (required)")
	seqLen := fs.Int("seq-len", 512, "seq_len of the header: run.c's KV cache, and the most tokens it generates")
	tok := fs.String("tokenizer", "", "tokenizer.bin to write, whose piece for token i is \" i\" (run.c's -z); empty: none")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		fmt.Fprintln(stderr, "-out: required (the .bin file to write)")
		return errUsage
	}
	if *dir == "" {
		d, err := DefaultModelDir()
		if err != nil {
			return err
		}
		*dir = d
	}
	h, err := llama2c.ExportFile(*dir, *out, *seqLen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: dim %d, hidden_dim %d, %d layers, %d heads, %d KV heads, vocab %d (shared classifier %v), seq_len %d, %d bytes\n",
		*out, h.Dim, h.HiddenDim, h.Layers, h.Heads, h.KVHeads, h.Vocab, h.Shared, h.SeqLen, h.Size())
	if *tok != "" {
		f, err := os.Create(*tok)
		if err != nil {
			return err
		}
		err = llama2c.WriteIDTokenizer(f, h.Vocab)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s: %d tokens, piece i is \" i\"\n", filepath.Clean(*tok), h.Vocab)
	}
	return nil
}
