package server

import (
	"fmt"

	"kvlab/common/kvcache"
)

// describeCache is c's structure, at most max nodes, and whether c can
// show it at all: kvcache.DescribeCache, which sees through the wrappers
// serve puts around a design (the ghosts' tap, the bound recorder).
func describeCache(c kvcache.PrefixCache, max int) (kvcache.View, bool) {
	return kvcache.DescribeCache(c, max)
}

// designName names c's design for an error: its Go type.
func designName(c kvcache.PrefixCache) string { return fmt.Sprintf("%T", c) }
