package model

import "math"

// InvFreq returns the head_dim/2 RoPE inverse frequencies, computed the way
// HuggingFace computes them: theta^(-2i/head_dim), then, for rope_type
// "llama3", Llama 3's wavelength-dependent rescaling.
//
// HuggingFace does this arithmetic on float32 tensors, so every step here is
// rounded to float32 in the same order. The power itself is taken in float64
// and rounded once, which is the correctly rounded float32 result; PyTorch's
// float32 pow agrees except, rarely, by one unit in the last place.
//
// For Gemma-3 these are the frequencies of the global (full-attention)
// layers; InvFreqLocal gives the sliding layers'.
func (c *Config) InvFreq() []float32 {
	inv := defaultInvFreq(c.RopeTheta, c.HeadDim)
	if rs := c.RopeScaling; rs != nil {
		switch rs.RopeType {
		case "llama3":
			llama3Scale(inv, rs)
		case "linear":
			// HuggingFace divides the float32 frequencies by the factor.
			for i := range inv {
				inv[i] /= float32(rs.Factor)
			}
		}
	}
	return inv
}

// InvFreqLocal returns the RoPE inverse frequencies of Gemma-3's sliding
// layers: plain RoPE with theta rope_local_base_freq; rope_scaling applies
// to the global layers only. For other architectures it is InvFreq.
func (c *Config) InvFreqLocal() []float32 {
	if c.Arch != ArchGemma3 {
		return c.InvFreq()
	}
	return defaultInvFreq(c.RopeLocalBaseFreq, c.HeadDim)
}

func defaultInvFreq(theta float64, headDim int) []float32 {
	dim := float32(headDim)
	inv := make([]float32, headDim/2)
	for i := range inv {
		exp := float32(2*i) / dim
		inv[i] = 1 / float32(math.Pow(theta, float64(exp)))
	}
	return inv
}

// llama3Scale applies Llama 3.1's frequency scaling in place: wavelengths
// shorter than original_max_position_embeddings/high_freq_factor are kept,
// those longer than original_max_position_embeddings/low_freq_factor are
// stretched by factor, and the band in between is blended linearly in
// 1/wavelength so the spectrum stays continuous.
func llama3Scale(inv []float32, rs *RopeScaling) {
	factor := float32(rs.Factor)
	low := float32(rs.LowFreqFactor)
	high := float32(rs.HighFreqFactor)
	oldCtx := float32(rs.OriginalMaxPositionEmbeddings)
	// Python computes these two in float64; they are compared against
	// float32 wavelengths, so rounding them to float32 matches.
	lowFreqWavelen := float32(float64(rs.OriginalMaxPositionEmbeddings) / rs.LowFreqFactor)
	highFreqWavelen := float32(float64(rs.OriginalMaxPositionEmbeddings) / rs.HighFreqFactor)
	twoPi := float32(2 * math.Pi)
	for i, f := range inv {
		wavelen := twoPi / f
		scaled := f
		if wavelen > lowFreqWavelen {
			scaled = f / factor
		}
		if wavelen >= highFreqWavelen && wavelen <= lowFreqWavelen {
			smooth := (float32(oldCtx/wavelen) - low) / (high - low)
			// The explicit conversions keep each product rounded on its
			// own, as in the reference, instead of letting the compiler fuse
			// them into one multiply-add.
			a := float32(float32(1-smooth)*scaled) / factor
			b := float32(smooth * scaled)
			scaled = a + b
		}
		inv[i] = scaled
	}
}
