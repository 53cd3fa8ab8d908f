package cli

import (
	"os"
	"path/filepath"

	"kvlab/common/model"
	"kvlab/common/server"
	"kvlab/common/tokenizer"
)

// modelInfo describes the checkpoint in dir for llama-server's /v1/models
// meta and /props: its shape from the config, its size from the
// safetensors files, and its parameters as that size over the bytes of one
// weight (the files' JSON headers, a few KB, are counted in; a checkpoint
// of mixed types is counted as its declared torch_dtype).
func modelInfo(cfg model.Config, dir string, tok *tokenizer.Tokenizer) server.ModelInfo {
	mi := server.ModelInfo{Vocab: cfg.VocabSize, CtxTrain: cfg.MaxPositionEmbeddings, Embd: cfg.HiddenSize, VocabType: 2}
	if tok != nil && tok.Scheme() == tokenizer.SentencePieceBPE {
		mi.VocabType = 1
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			mi.Size += st.Size()
		}
	}
	width := int64(4)
	switch cfg.TorchDType {
	case "bfloat16":
		mi.FType, width = "BF16", 2
	case "float16":
		mi.FType, width = "F16", 2
	default:
		mi.FType = "F32"
	}
	mi.Params = mi.Size / width
	return mi
}
