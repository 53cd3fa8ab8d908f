package gguf

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
)

func TestGemmaPeriod(t *testing.T) {
	s, f := model.LayerSliding, model.LayerFull
	for _, c := range []struct {
		types []string
		want  uint32
		ok    bool
	}{
		{[]string{s, s, s, s, s, f, s, s}, 6, true},
		{[]string{f, f, f}, 1, true},
		{[]string{s, f, s, f}, 2, true},
		{[]string{s, s}, 3, true},
		{[]string{f, s, s}, 0, false},
		{[]string{s, f, s, s, f}, 0, false},
	} {
		p, err := gemmaPeriod(c.types)
		if !c.ok {
			assert.Error(t, err, c.types)
			continue
		}
		require.NoError(t, err, c.types)
		assert.Equal(t, c.want, p, c.types)
	}
}
