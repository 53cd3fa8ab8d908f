package kernels

import "fmt"

// The checks below are the preconditions every backend enforces on its
// arguments. A violation is a programming error in the caller, so backends
// panic with the returned error, prefixed with their name and the
// operation; keeping the checks here keeps the backends' contracts equal.

// CheckSameShape reports two tensors whose shapes differ.
func CheckSameShape(a, b Tensor) error {
	if a.Rows() != b.Rows() || a.Cols() != b.Cols() {
		return fmt.Errorf("shapes %d×%d and %d×%d differ", a.Rows(), a.Cols(), b.Rows(), b.Cols())
	}
	return nil
}

// CheckAttend reports arguments Attend (local = false) or AttendLocal
// (local = true) cannot run on: a bad shape, mismatched tensors, a sequence
// whose query rows fall outside q, or, for AttendLocal, k and v with fewer
// rows than q (query row i reads key and value row i and those before it).
func CheckAttend(out, q, k, v Tensor, seqs []AttnSeq, sh AttnShape, local bool) error {
	hd := sh.HeadDim
	if hd <= 0 || sh.NumHeads <= 0 || sh.NumKVHeads <= 0 || sh.NumHeads%sh.NumKVHeads != 0 {
		return fmt.Errorf("bad shape %+v", sh)
	}
	if sh.Window < 0 || !(sh.SoftCap >= 0) {
		return fmt.Errorf("bad window %d or soft cap %v", sh.Window, sh.SoftCap)
	}
	if !local && sh.BlockSize <= 0 {
		return fmt.Errorf("block size %d", sh.BlockSize)
	}
	if err := CheckSameShape(out, q); err != nil {
		return err
	}
	if err := CheckSameShape(k, v); err != nil {
		return err
	}
	if q.Cols() != sh.NumHeads*hd || k.Cols() != sh.NumKVHeads*hd {
		return fmt.Errorf("q is %d wide and k %d wide for shape %+v", q.Cols(), k.Cols(), sh)
	}
	if local && k.Rows() < q.Rows() {
		return fmt.Errorf("k and v have %d rows for %d query rows", k.Rows(), q.Rows())
	}
	for s, seq := range seqs {
		if seq.QLen < 0 || seq.QLen > seq.CtxLen || seq.QStart < 0 || seq.QStart+seq.QLen > q.Rows() {
			return fmt.Errorf("sequence %d %+v does not fit %d query rows", s, seq, q.Rows())
		}
	}
	return nil
}

// CheckCopyBlock reports a block copy outside the caches kc and vc.
func CheckCopyBlock(kc, vc Tensor, src, dst int32, blockSize int) error {
	if err := CheckSameShape(kc, vc); err != nil {
		return err
	}
	blocks := 0
	if blockSize > 0 {
		blocks = kc.Rows() / blockSize
	}
	if src < 0 || dst < 0 || int(src) >= blocks || int(dst) >= blocks {
		return fmt.Errorf("block %d→%d of %d blocks of %d", src, dst, blocks, blockSize)
	}
	return nil
}
