//go:build !cuda && !cudaemu

package cuda

import "kvlab/kernels"

// New reports ErrNotBuilt: this binary was compiled without the cuda build
// tag, so it contains no GPU code at all.
func New() (kernels.Backend, error) { return nil, ErrNotBuilt }
