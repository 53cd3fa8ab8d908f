package llama2c_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/common/model/llama2c"
	"kvlab/common/model/modeltest"
	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// options is a small Llama that run.c can compute: theta 10000, no RoPE
// scaling, head_dim × heads = hidden.
func options(tied bool) model.SynthOptions {
	o := modeltest.Options("llama", 3)
	o.Heads, o.KVHeads, o.HeadDim = 4, 2, 16
	o.RopeTheta, o.RopeScaling = 10000, nil
	o.Tied = tied
	return o
}

func export(t *testing.T, o model.SynthOptions, seqLen int) (dir string, file []byte, h llama2c.Header) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "model")
	require.NoError(t, model.WriteSynthetic(dir, o))
	path := filepath.Join(t.TempDir(), "model.bin")
	h, err := llama2c.ExportFile(dir, path, seqLen)
	require.NoError(t, err)
	file, err = os.ReadFile(path)
	require.NoError(t, err)
	return dir, file, h
}

func floats(b []byte, t llama2c.Tensor) []float32 {
	out := make([]float32, t.Len)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[t.Offset+4*int64(i):]))
	}
	return out
}

func TestFormat(t *testing.T) {
	for _, tied := range []bool{true, false} {
		o := options(tied)
		dir, file, h := export(t, o, 32)
		got, err := llama2c.ReadHeader(bytes.NewReader(file))
		require.NoError(t, err)
		assert.Equal(t, h, got)
		assert.Equal(t, llama2c.Header{Dim: 64, HiddenDim: 128, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 512, SeqLen: 32, Shared: tied}, got)
		vocab := int32(binary.LittleEndian.Uint32(file[20:]))
		assert.Equal(t, map[bool]int32{true: 512, false: -512}[tied], vocab, "the sign of vocab_size says whether the classifier is shared")
		assert.Equal(t, got.Size(), int64(len(file)))

		layout := map[string]llama2c.Tensor{}
		var names []string
		for _, ten := range got.Layout() {
			layout[ten.Name] = ten
			names = append(names, ten.Name)
		}
		want := []string{"token_embedding_table", "rms_att_weight", "wq", "wk", "wv", "wo", "rms_ffn_weight", "w1", "w2", "w3", "rms_final_weight", "freq_cis"}
		if !tied {
			want = append(want, "wcls")
		}
		assert.Equal(t, want, names)
		assert.Equal(t, int64(llama2c.HeaderSize), layout["token_embedding_table"].Offset)
		assert.Equal(t, int64(2*64*64), layout["wq"].Len)
		assert.Equal(t, int64(2*32*64), layout["wk"].Len)
		assert.Equal(t, int64(32*16), layout["freq_cis"].Len)

		ck, err := model.OpenCheckpoint(dir)
		require.NoError(t, err)
		read := func(name string, shape ...int) []float32 {
			ht, err := ck.Read(name, shape...)
			require.NoError(t, err)
			return ht.Data
		}
		assert.Equal(t, read("model.embed_tokens.weight", 512, 64), floats(file, layout["token_embedding_table"]))
		assert.Equal(t, read("model.norm.weight", 64), floats(file, layout["rms_final_weight"]))
		// Layer 1's down projection: w2 holds every layer's in turn.
		w2 := floats(file, layout["w2"])
		assert.Equal(t, read("model.layers.1.mlp.down_proj.weight", 64, 128), w2[64*128:])
		// Layer 1's wk, head 1: row 2i+s is HuggingFace's row s·8+i.
		wk := floats(file, layout["wk"])[32*64:]
		hf := read("model.layers.1.self_attn.k_proj.weight", 32, 64)
		for i := range 8 {
			for s := range 2 {
				assert.Equal(t, hf[(16+s*8+i)*64:][:64], wk[(16+2*i+s)*64:][:64])
			}
		}
		assert.Equal(t, make([]float32, 32*16), floats(file, layout["freq_cis"]))
		if !tied {
			assert.Equal(t, read("lm_head.weight", 512, 64), floats(file, layout["wcls"]))
		}
		ck.Close()
	}
}

func TestRefusesWhatRunCannotCompute(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	require.NoError(t, model.WriteSynthetic(dir, modeltest.Options("llama", 1))) // Llama 3.2's RoPE
	_, err := llama2c.Export(dir, &bytes.Buffer{}, 16)
	assert.ErrorContains(t, err, "theta 10000")

	o := options(true)
	o.RMSNormEps = 1e-6
	dir = filepath.Join(t.TempDir(), "model")
	require.NoError(t, model.WriteSynthetic(dir, o))
	_, err = llama2c.Export(dir, &bytes.Buffer{}, 16)
	assert.ErrorContains(t, err, "epsilon")

	_, err = llama2c.ReadHeader(bytes.NewReader(make([]byte, 28)))
	assert.Error(t, err)
}

// TestSameFunction runs the exported file through runC, a plain one-token
// forward written here with run.c's conventions (adjacent-pair RoPE, its
// RMSNorm epsilon, its tensor layout), and checks its logits against the
// project's forward of the HuggingFace checkpoint at every position.
func TestSameFunction(t *testing.T) {
	for _, tied := range []bool{true, false} {
		o := options(tied)
		dir, file, h := export(t, o, 16)
		m, err := model.Load(dir, cpu.New())
		require.NoError(t, err)
		defer m.Close()

		prompt := []int32{1, 17, 300, 5, 511, 42, 42, 9, 128, 77, 3, 260}
		s := &model.Step{Local: true, Seqs: []kernels.AttnSeq{{QLen: len(prompt), CtxLen: len(prompt)}}}
		for i, tok := range prompt {
			s.Tokens = append(s.Tokens, tok)
			s.Pos = append(s.Pos, int32(i))
			s.LogitRows = append(s.LogitRows, int32(i))
		}
		out := m.Forward(s, nil)
		ours := m.Backend().ToHost(out, make([]float32, out.Rows()*out.Cols()))

		r := newRunC(file, h)
		for pos, tok := range prompt {
			theirs := r.forward(int(tok), pos)
			want := ours[pos*h.Vocab : (pos+1)*h.Vocab]
			for i := range theirs {
				require.InDelta(t, want[i], theirs[i], 1e-4*(1+math.Abs(float64(want[i]))), "tied %v, position %d, logit %d", tied, pos, i)
			}
		}
	}
}

// runC is a naive forward over the file's bytes under run.c's conventions:
// what run.c would compute from this file.
type runC struct {
	h      llama2c.Header
	w      map[string][]float32
	kc, vc [][]float32 // per layer: position × kv dim
}

func newRunC(file []byte, h llama2c.Header) *runC {
	r := &runC{h: h, w: map[string][]float32{}}
	for _, t := range h.Layout() {
		r.w[t.Name] = floats(file, t)
	}
	if h.Shared {
		r.w["wcls"] = r.w["token_embedding_table"]
	}
	kv := h.KVHeads * h.HeadDim()
	for range h.Layers {
		r.kc = append(r.kc, make([]float32, h.SeqLen*kv))
		r.vc = append(r.vc, make([]float32, h.SeqLen*kv))
	}
	return r
}

// matvec returns W·x for W of rows×len(x), the rows-th block of w at index
// l.
func matvec(w []float32, l, rows int, x []float32) []float32 {
	n := len(x)
	w = w[l*rows*n:]
	out := make([]float32, rows)
	for i := range out {
		var s float32
		for j, xj := range x {
			s += w[i*n+j] * xj
		}
		out[i] = s
	}
	return out
}

func rmsnorm(x, w []float32) []float32 {
	var ss float32
	for _, v := range x {
		ss += v * v
	}
	ss = 1 / float32(math.Sqrt(float64(ss/float32(len(x))+1e-5)))
	out := make([]float32, len(x))
	for i := range x {
		out[i] = w[i] * ss * x[i]
	}
	return out
}

func (r *runC) forward(token, pos int) []float32 {
	h := r.h
	d, hs := h.Dim, h.HeadDim()
	kvDim := h.KVHeads * hs
	x := append([]float32(nil), r.w["token_embedding_table"][token*d:(token+1)*d]...)
	for l := range h.Layers {
		xb := rmsnorm(x, r.w["rms_att_weight"][l*d:])
		q := matvec(r.w["wq"], l, d, xb)
		k := matvec(r.w["wk"], l, kvDim, xb)
		v := matvec(r.w["wv"], l, kvDim, xb)
		// RoPE on adjacent pairs.
		for i := 0; i < d; i += 2 {
			freq := 1 / math.Pow(10000, float64(i%hs)/float64(hs))
			c, s := float32(math.Cos(float64(pos)*freq)), float32(math.Sin(float64(pos)*freq))
			vecs := [][]float32{q}
			if i < kvDim {
				vecs = append(vecs, k)
			}
			for _, vec := range vecs {
				v0, v1 := vec[i], vec[i+1]
				vec[i], vec[i+1] = v0*c-v1*s, v0*s+v1*c
			}
		}
		copy(r.kc[l][pos*kvDim:], k)
		copy(r.vc[l][pos*kvDim:], v)
		att := make([]float32, d)
		for hd := range h.Heads {
			kvh := hd / (h.Heads / h.KVHeads)
			qh := q[hd*hs : (hd+1)*hs]
			scores := make([]float64, pos+1)
			top := math.Inf(-1)
			for t := range scores {
				kt := r.kc[l][t*kvDim+kvh*hs:][:hs]
				var s float32
				for i := range qh {
					s += qh[i] * kt[i]
				}
				scores[t] = float64(s) / math.Sqrt(float64(hs))
				top = math.Max(top, scores[t])
			}
			var sum float64
			for t := range scores {
				scores[t] = math.Exp(scores[t] - top)
				sum += scores[t]
			}
			for t := range scores {
				vt := r.vc[l][t*kvDim+kvh*hs:][:hs]
				for i := range hs {
					att[hd*hs+i] += float32(scores[t]/sum) * vt[i]
				}
			}
		}
		o := matvec(r.w["wo"], l, d, att)
		for i := range x {
			x[i] += o[i]
		}
		xb = rmsnorm(x, r.w["rms_ffn_weight"][l*d:])
		g := matvec(r.w["w1"], l, h.HiddenDim, xb)
		u := matvec(r.w["w3"], l, h.HiddenDim, xb)
		for i := range g {
			g[i] = g[i] / (1 + float32(math.Exp(-float64(g[i])))) * u[i]
		}
		f := matvec(r.w["w2"], l, d, g)
		for i := range x {
			x[i] += f[i]
		}
	}
	x = rmsnorm(x, r.w["rms_final_weight"])
	return matvec(r.w["wcls"], 0, h.Vocab, x)
}

func TestIDTokenizer(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, llama2c.WriteIDTokenizer(&b, 1000))
	raw := b.Bytes()
	assert.Equal(t, uint32(4), binary.LittleEndian.Uint32(raw)) // " 999"
	// Token 0: score 0, length 2, " 0"; token 999 is the last 4+4+4 bytes.
	assert.Equal(t, []byte{0, 0, 0, 0, 2, 0, 0, 0, ' ', '0'}, raw[4:14])
	assert.Equal(t, " 999", string(raw[len(raw)-4:]))
}
