package kvcache

// DescribeForwarder is what a wrapper that sits between the pool and a
// design implements (the ghost Tap, bound's Recorder, ShareCapped's
// per-salt cache): TryDescribe returns the View of what it wraps, and
// ok=false when that cache is no Describer. A wrapper does not implement
// Describer itself, so it never claims a structure it cannot show.
type DescribeForwarder interface {
	TryDescribe(max int) (v View, ok bool)
}

// DescribeCache returns c's structure as data: c's own Describe if c is a
// Describer, what c forwards if it is a DescribeForwarder, else ok=false.
// It is the one call a server makes: DescribeCache(pool.Cache(), max).
// Like Describe, it must be called where the cache's other methods are (the
// engine's goroutine) and changes nothing.
func DescribeCache(c PrefixCache, max int) (v View, ok bool) {
	switch d := c.(type) {
	case Describer:
		return d.Describe(max), true
	case DescribeForwarder:
		return d.TryDescribe(max)
	}
	return View{}, false
}

// Truncate keeps the first max nodes of v (all of them when max <= 0 or
// v has no more) and adds the rest to v.Truncated. A design lists its
// nodes in depth-first order, each node right before its subtree, so what
// it drops from the end are whole subtrees and every kept node's parent is
// kept: the order stays parents first.
func (v View) Truncate(max int) View {
	if max <= 0 || len(v.Nodes) <= max {
		return v
	}
	v.Truncated += len(v.Nodes) - max
	v.Nodes = v.Nodes[:max:max]
	return v
}
