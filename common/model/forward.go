package model

import (
	"fmt"
	"math"

	"kvlab/kernels"
)

// KV gives the forward access to the paged KV pool: one K and one V tensor
// per layer, rows = blocks*BlockSize KV slots, cols = KVHeads*HeadDim.
type KV interface {
	Layer(l int) (k, v kernels.Tensor)
	BlockSize() int
}

// Step is one forward over a flat batch of tokens from several sequences.
type Step struct {
	Tokens []int32           // token ids, all sequences concatenated
	Pos    []int32           // position of each token in its sequence
	Slots  []int32           // KV slot of each token: block*BlockSize + offset
	Seqs   []kernels.AttnSeq // one entry per sequence (QStart/QLen index into Tokens)
	// Local marks a whole-prompt prefill: attention uses this step's fresh
	// keys and values (AttendLocal) instead of reading the cache, which is
	// valid only when every sequence starts at position 0. The keys and
	// values are still written to the cache for later steps.
	Local bool
	// LogitRows are the rows of Tokens whose logits are wanted (usually the
	// last token of each sequence). Empty means none: the step only fills
	// the cache, as for a prefill chunk that does not end a prompt.
	LogitRows []int32
	// LocalSlots and LocalSeqs, when LocalSeqs is not nil, address the
	// sliding-window layers' own KV storage (a pool that gives back their
	// out-of-window blocks): those layers write KV to LocalSlots and attend
	// through LocalSeqs' page tables; the other layers use Slots and Seqs.
	LocalSlots []int32
	LocalSeqs  []kernels.AttnSeq
}

// Forward runs the model on s and returns a len(s.LogitRows)×vocab tensor of
// logits (nil when LogitRows is empty), valid until the next Forward.
//
// kv may be nil only for a Local step: nothing is cached then, which suits
// scoring a prompt once. Forward panics on malformed steps (mismatched
// lengths); token ids are trusted, see CheckTokens.
func (m *Model) Forward(s *Step, kv KV) kernels.Tensor {
	n := len(s.Tokens)
	switch {
	case m.closed:
		// The weights may have been views of an unmapped file: reading
		// them would crash the process, not panic.
		panic("model: Forward after Close")
	case n == 0:
		panic("model: Forward on an empty step")
	case len(s.Pos) != n:
		panic(fmt.Sprintf("model: step has %d tokens but %d positions", n, len(s.Pos)))
	case kv != nil && len(s.Slots) != n:
		panic(fmt.Sprintf("model: step has %d tokens but %d KV slots", n, len(s.Slots)))
	case kv == nil && !s.Local:
		panic("model: a step without a KV cache must be Local")
	case s.LocalSeqs != nil && (len(s.LocalSlots) != n || len(s.LocalSeqs) != len(s.Seqs)):
		panic(fmt.Sprintf("model: step has %d tokens and %d sequences but %d local KV slots and %d local sequences", n, len(s.Seqs), len(s.LocalSlots), len(s.LocalSeqs)))
	}

	be, c := m.be, &m.Config
	hd := c.HeadDim
	eps := float32(c.RMSNormEps)
	shape := kernels.AttnShape{
		NumHeads:   c.NumAttentionHeads,
		NumKVHeads: c.NumKeyValueHeads,
		HeadDim:    hd,
		Scale:      float32(1 / math.Sqrt(float64(hd))),
	}
	gemma := m.gemma != nil
	if gemma {
		// Gemma-3 scales scores by query_pre_attn_scalar^-1/2, not
		// head_dim^-1/2 (the two agree in some sizes, not all).
		shape.Scale = float32(1 / math.Sqrt(c.QueryPreAttnScalar))
		shape.SoftCap = float32(c.AttnLogitSoftcapping)
	}
	if kv != nil {
		shape.BlockSize = kv.BlockSize()
	}

	sc := &m.scr
	sc.ensure(be, c, n, len(s.LogitRows))
	x := be.View(sc.x, 0, n) // the residual stream
	h := be.View(sc.h, 0, n) // normed input to a sublayer, then its output
	q, att := be.View(sc.q, 0, n), be.View(sc.att, 0, n)
	k, v := be.View(sc.k, 0, n), be.View(sc.v, 0, n)
	gate, up, act := be.View(sc.gate, 0, n), be.View(sc.up, 0, n), be.View(sc.act, 0, n)

	be.Embed(x, m.embed, s.Tokens)
	if gemma {
		m.gemma.Scale(x, m.embedScale, m.embedRound)
	}
	for l, w := range m.layers {
		shape.Window = w.window
		// Attention sublayer.
		be.RMSNorm(h, x, w.inNorm, eps)
		// q, k and v are products of the same input, handed to the
		// backend together (one hand-off to the cores for all three).
		sc.prods = [3]kernels.Product{{Dst: q, W: w.wq}, {Dst: k, W: w.wk}, {Dst: v, W: w.wv}}
		kernels.MatMulTMany(be, h, sc.prods[:3])
		if w.qNorm != nil { // Qwen3, Gemma-3: normalise each head before rotating it
			be.RMSNormHeads(q, w.qNorm, hd, eps)
			be.RMSNormHeads(k, w.kNorm, hd, eps)
		}
		be.RoPE(q, s.Pos, hd, w.invFreq)
		be.RoPE(k, s.Pos, hd, w.invFreq)
		slots, seqs := s.Slots, s.Seqs
		if w.window > 0 && s.LocalSeqs != nil {
			slots, seqs = s.LocalSlots, s.LocalSeqs
		}
		var kc, vc kernels.Tensor
		if kv != nil {
			kc, vc = kv.Layer(l)
			be.WriteKV(kc, vc, k, v, slots)
		}
		if s.Local {
			be.AttendLocal(att, q, k, v, seqs, shape)
		} else {
			be.Attend(att, q, kc, vc, seqs, shape)
		}
		be.MatMulT(h, att, w.wo)
		if gemma {
			// Gemma normalises each sublayer's output before adding it.
			be.RMSNorm(h, h, w.postNorm, eps)
		}
		be.Add(x, h)

		// MLP sublayer.
		if gemma {
			be.RMSNorm(h, x, w.preFFNorm, eps)
		} else {
			be.RMSNorm(h, x, w.postNorm, eps)
		}
		sc.prods = [3]kernels.Product{{Dst: gate, W: w.wGate}, {Dst: up, W: w.wUp}}
		kernels.MatMulTMany(be, h, sc.prods[:2])
		if gemma {
			m.gemma.GELUTanhMul(act, gate, up)
		} else {
			be.SiLUMul(act, gate, up)
		}
		be.MatMulT(h, act, w.wDown)
		if gemma {
			be.RMSNorm(h, h, w.postFFNorm, eps)
		}
		be.Add(x, h)
	}

	nl := len(s.LogitRows)
	if nl == 0 {
		return nil
	}
	// The final norm is per row, so gathering first saves normalising and
	// projecting rows whose logits nobody reads: in a prefill, all but one.
	xl := be.View(sc.xl, 0, nl)
	logits := be.View(sc.logits, 0, nl)
	be.GatherRows(xl, x, s.LogitRows)
	be.RMSNorm(xl, xl, m.norm, eps)
	be.MatMulT(logits, xl, m.lmHead)
	if gemma && c.FinalLogitSoftcapping > 0 {
		m.gemma.SoftCap(logits, float32(c.FinalLogitSoftcapping))
	}
	return logits
}

// scratch holds the activations of one step, sized for the largest step
// seen so far; Forward works on row-prefix Views of them, so steady-state
// decoding allocates nothing on the backend.
type scratch struct {
	tokens, outs int // row capacity of the per-token and per-logit tensors

	x, h, q, att, k, v, gate, up, act kernels.Tensor // tokens rows
	xl, logits                        kernels.Tensor // outs rows

	prods [3]kernels.Product // the products of one input, for MatMulTMany
}

func (sc *scratch) ensure(be kernels.Backend, c *Config, n, nl int) {
	if n > sc.tokens {
		sc.freeTokens(be)
		sc.tokens = n
		sc.x, sc.h = be.New(n, c.HiddenSize), be.New(n, c.HiddenSize)
		sc.q, sc.att = be.New(n, c.QDim()), be.New(n, c.QDim())
		sc.k, sc.v = be.New(n, c.KVDim()), be.New(n, c.KVDim())
		inter := c.IntermediateSize
		sc.gate, sc.up, sc.act = be.New(n, inter), be.New(n, inter), be.New(n, inter)
	}
	if nl > sc.outs {
		sc.freeOuts(be)
		sc.outs = nl
		sc.xl, sc.logits = be.New(nl, c.HiddenSize), be.New(nl, c.VocabSize)
	}
}

func (sc *scratch) freeTokens(be kernels.Backend) {
	if sc.tokens == 0 {
		return
	}
	for _, t := range []kernels.Tensor{sc.x, sc.h, sc.q, sc.att, sc.k, sc.v, sc.gate, sc.up, sc.act} {
		be.Free(t)
	}
	sc.tokens = 0
}

func (sc *scratch) freeOuts(be kernels.Backend) {
	if sc.outs == 0 {
		return
	}
	be.Free(sc.xl)
	be.Free(sc.logits)
	sc.outs = 0
}

func (sc *scratch) free(be kernels.Backend) {
	sc.freeTokens(be)
	sc.freeOuts(be)
}
