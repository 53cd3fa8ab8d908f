package server

import (
	"fmt"

	"kvlab/common/kvcache"
)

// describeCache is c's structure, at most max nodes, and whether c can
// show it at all (it implements kvcache.Describer).
func describeCache(c kvcache.PrefixCache, max int) (kvcache.View, bool) {
	d, ok := c.(kvcache.Describer)
	if !ok {
		return kvcache.View{}, false
	}
	return d.Describe(max), true
}

// designName names c's design for an error: its Go type.
func designName(c kvcache.PrefixCache) string { return fmt.Sprintf("%T", c) }
