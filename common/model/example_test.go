package model_test

import (
	"fmt"
	"log"
	"os"

	"kvlab/common/model"
	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// A synthetic checkpoint has the files and config.json of a real one.
func ExampleWriteSynthetic() {
	dir, err := os.MkdirTemp("", "synth")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	if err := model.WriteSynthetic(dir, model.DefaultSynth("qwen3")); err != nil {
		log.Fatal(err)
	}
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.Arch, "hidden", cfg.HiddenSize, "layers", cfg.NumHiddenLayers, "head_dim", cfg.HeadDim)
	// Output: Qwen3ForCausalLM hidden 256 layers 4 head_dim 64
}

// Scoring a prompt needs no KV cache: a Local step attends within the
// prompt itself.
func ExampleModel_Forward() {
	dir, err := os.MkdirTemp("", "synth")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := model.WriteSynthetic(dir, model.DefaultSynth("llama")); err != nil {
		log.Fatal(err)
	}
	m, err := model.Load(dir, cpu.New())
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	prompt := []int32{1, 17, 42}
	if err := m.CheckTokens(prompt); err != nil {
		log.Fatal(err)
	}
	logits := m.Forward(&model.Step{
		Tokens:    prompt,
		Pos:       []int32{0, 1, 2},
		Seqs:      []kernels.AttnSeq{{QStart: 0, QLen: 3, CtxLen: 3}},
		Local:     true,
		LogitRows: []int32{2}, // the next-token distribution after the whole prompt
	}, nil)
	fmt.Println("logits", logits.Rows(), "x", logits.Cols())
	// Output: logits 1 x 4096
}
