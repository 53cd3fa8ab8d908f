package kvcache

// Forget forgets the prefix in salt's own instance, the only one that can
// hold it, if that design forgets (Forgetter); an instance left empty and
// unused goes, as after an eviction.
func (c *shareCache) Forget(salt string, tokens []int32) int {
	p := c.parts[salt]
	if p == nil {
		return 0
	}
	f, ok := p.cache.(Forgetter)
	if !ok {
		return 0
	}
	n := f.Forget(salt, tokens)
	c.drop(salt)
	return n
}
