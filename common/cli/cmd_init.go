package cli

import (
	"fmt"
	"io"

	"kvlab/common/model"
)

func runInitModel(v Variant, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(v, "init-model", stderr)
	arch := fs.String("arch", "llama", "architecture: llama, qwen3 or gemma3")
	out := fs.String("out", "", "directory to write (required)")
	seed := fs.Int64("seed", 0, "random seed; 0 keeps the architecture's default seed")
	dtype := fs.String("dtype", "", "dtype on disk: f32, bf16 or f16 (default: the architecture default)")
	hidden := fs.Int("hidden", 0, "hidden_size (0: default)")
	layers := fs.Int("layers", 0, "num_hidden_layers (0: default)")
	heads := fs.Int("heads", 0, "num_attention_heads (0: default)")
	kvHeads := fs.Int("kv-heads", 0, "num_key_value_heads (0: default)")
	headDim := fs.Int("head-dim", 0, "head_dim (0: default)")
	inter := fs.Int("intermediate", 0, "intermediate_size (0: default)")
	vocab := fs.Int("vocab", 0, "vocab_size (0: default)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("-out: required (the directory to write the model into)")
	}
	var o model.SynthOptions
	switch *arch {
	case "llama":
		o = model.DefaultSynth(model.ArchLlama)
	case "qwen3":
		o = model.DefaultSynth(model.ArchQwen3)
	case "gemma3":
		o = model.DefaultSynth(model.ArchGemma3)
	default:
		return fmt.Errorf("-arch: unknown architecture %q (want llama, qwen3 or gemma3)", *arch)
	}
	setIf := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	setIf(&o.Hidden, *hidden)
	setIf(&o.Layers, *layers)
	setIf(&o.Heads, *heads)
	setIf(&o.KVHeads, *kvHeads)
	setIf(&o.HeadDim, *headDim)
	setIf(&o.Intermediate, *inter)
	setIf(&o.Vocab, *vocab)
	if *seed != 0 {
		o.Seed = *seed
	}
	if *dtype != "" {
		o.DType = *dtype
	}
	if err := model.WriteSynthetic(*out, o); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s model (%d layers, hidden %d, vocab %d, %s) to %s\n", *arch, o.Layers, o.Hidden, o.Vocab, o.DType, *out)
	return nil
}
