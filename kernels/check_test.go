package kernels_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

func TestChecks(t *testing.T) {
	be := cpu.New()
	q, k := be.New(3, 8), be.New(16, 4) // 2 heads of 4, 1 KV head; 4 blocks of 4
	shape := kernels.AttnShape{NumHeads: 2, NumKVHeads: 1, HeadDim: 4, BlockSize: 4, Scale: 0.5}
	seq := kernels.AttnSeq{QStart: 0, QLen: 3, CtxLen: 5, Pages: []int32{0, 1}}
	require.NoError(t, kernels.CheckAttend(q, q, k, k, []kernels.AttnSeq{seq}, shape, false))

	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"uneven GQA", kernels.CheckAttend(q, q, k, k, nil, kernels.AttnShape{NumHeads: 3, NumKVHeads: 2, HeadDim: 4, BlockSize: 4}, false), "bad shape"},
		{"no block size", kernels.CheckAttend(q, q, k, k, nil, kernels.AttnShape{NumHeads: 2, NumKVHeads: 1, HeadDim: 4}, false), "block size"},
		{"out differs from q", kernels.CheckAttend(be.New(2, 8), q, k, k, nil, shape, false), "differ"},
		{"rows past q", kernels.CheckAttend(q, q, k, k, []kernels.AttnSeq{{QStart: 2, QLen: 2, CtxLen: 2}}, shape, false), "does not fit"},
		{"more queries than context", kernels.CheckAttend(q, q, k, k, []kernels.AttnSeq{{QLen: 3, CtxLen: 2}}, shape, false), "does not fit"},
		{"local k shorter than q", kernels.CheckAttend(q, q, be.New(2, 4), be.New(2, 4), []kernels.AttnSeq{{QLen: 2, CtxLen: 2}}, shape, true), "k and v have 2 rows for 3 query rows"},
		{"local k empty", kernels.CheckAttend(q, q, be.New(0, 4), be.New(0, 4), nil, shape, true), "k and v have 0 rows for 3 query rows"},
		{"copy past the cache", kernels.CheckCopyBlock(k, k, 0, 4, 4), "block 0→4 of 4"},
		{"negative block", kernels.CheckCopyBlock(k, k, -1, 0, 4), "block -1→0"},
	} {
		t.Run(tc.name, func(t *testing.T) { require.ErrorContains(t, tc.err, tc.want) })
	}
	require.NoError(t, kernels.CheckCopyBlock(k, k, 3, 0, 4))
	// AttendLocal: k and v as long as q, or longer (paged attention's cache
	// may be shorter than q: its rows are reached through the page tables).
	local := []kernels.AttnSeq{{QStart: 0, QLen: 3, CtxLen: 3}}
	require.NoError(t, kernels.CheckAttend(q, q, be.New(3, 4), be.New(3, 4), local, shape, true))
	require.NoError(t, kernels.CheckAttend(q, q, k, k, local, shape, true))
	require.NoError(t, kernels.CheckAttend(q, q, be.New(2, 4), be.New(2, 4), []kernels.AttnSeq{{QLen: 1, CtxLen: 1, Pages: []int32{0}}},
		kernels.AttnShape{NumHeads: 2, NumKVHeads: 1, HeadDim: 4, BlockSize: 2, Scale: 0.5}, false))
}
