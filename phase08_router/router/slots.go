package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// A llama-server replica runs each request in one of its slots (-np N),
// and a slot's KV holds one sequence: the last prompt it ran and what it
// generated. A request that lands in the slot holding its prefix reuses
// it; one that lands in another slot recomputes it, unless the server's
// own prompt cache has a copy. The server picks a slot itself when the
// request names none: the idle slot whose sequence is most similar, or the
// least recently used one. A request that arrives while every slot is busy
// waits and then takes whichever slot frees first, which is often not the
// one holding its prefix. Naming the slot (id_slot) makes it wait for the
// right one instead.
//
// So with Options.Slots > 0 the router routes twice: the policy picks the
// replica, then (for a SlotPolicy) the slot, and the router adds id_slot to
// the body it sends. It is the one place the router changes the client's
// bytes, and only by adding that one field; a body that already names a
// slot is sent as it came.

// SlotPolicy is a policy that also chooses a replica's slot.
type SlotPolicy interface {
	Policy
	// PickSlot returns the slot of replica to send key to, or -1 to let
	// the replica choose. loads are the requests the router has in flight
	// on each of the replica's slots.
	PickSlot(key Key, replica int, loads []int) int
	// RoutedSlot records that key's prompt ran in slot of replica: the
	// slot holds it now, and nothing it held before.
	RoutedSlot(key Key, replica, slot int)
	// WarmSource returns the slot of replica holding the longest prefix
	// of key (at least the policy's threshold), an idle one first, or -1.
	// A busy one can still be saved: llama-server defers the save until
	// the slot's request is done.
	WarmSource(key Key, replica int, loads []int) int
	// FreeSlot returns an idle slot of replica to restore into: the least
	// recently used, or -1 if every slot is busy.
	FreeSlot(replica int, loads []int) int
	// Warmed records that slot of replica now holds what slot src of
	// replica home held (a restored file).
	Warmed(key Key, home, src, replica, slot int)
}

// PickSlot sends key to the slot of replica whose last prompt shares the
// longest prefix with it, if that prefix is at least the threshold of the
// prompt: an idle such slot first, else the best one even if busy, where
// the request waits for it rather than recompute its prefix elsewhere.
// With no such slot it returns -1: the replica picks, and can use its own
// prompt cache to refill whichever slot it takes.
func (p *prefixPolicy) PickSlot(key Key, replica int, loads []int) int {
	m := p.tree(key.Salt).MatchSlots(key.Tokens, replica)
	need := max(1, int(p.threshold*float64(len(key.Tokens))+0.5))
	best, bestIdle := -1, -1
	for s := range loads {
		if m[s] < need {
			continue
		}
		if best < 0 || m[s] > m[best] || m[s] == m[best] && loads[s] < loads[best] {
			best = s
		}
		if loads[s] == 0 && (bestIdle < 0 || m[s] > m[bestIdle]) {
			bestIdle = s
		}
	}
	if bestIdle >= 0 {
		return bestIdle
	}
	return best
}

func (p *prefixPolicy) RoutedSlot(key Key, replica, slot int) {
	p.mu.Lock()
	others := make([]*Tree, 0, len(p.trees))
	for salt, t := range p.trees {
		if salt != key.Salt {
			others = append(others, t)
		}
	}
	p.mu.Unlock()
	// The slot's previous sequence is gone, whoever's it was.
	for _, t := range others {
		t.ClearSlot(replica, slot)
	}
	p.tree(key.Salt).InsertSlot(key.Tokens, replica, slot)
}

func (p *prefixPolicy) WarmSource(key Key, replica int, loads []int) int {
	m := p.tree(key.Salt).MatchSlots(key.Tokens, replica)
	need := max(1, int(p.threshold*float64(len(key.Tokens))+0.5))
	best := -1
	for s := range loads {
		if m[s] < need {
			continue
		}
		if best < 0 || loads[s] == 0 && loads[best] > 0 || (loads[s] == 0) == (loads[best] == 0) && m[s] > m[best] {
			best = s
		}
	}
	return best
}

func (p *prefixPolicy) FreeSlot(replica int, loads []int) int {
	p.mu.Lock()
	trees := make([]*Tree, 0, len(p.trees))
	for _, t := range p.trees {
		trees = append(trees, t)
	}
	p.mu.Unlock()
	best, bestAt := -1, uint64(0)
	for s := range loads {
		if loads[s] > 0 {
			continue
		}
		var at uint64 // 0: the slot never ran anything the router saw
		for _, t := range trees {
			at = max(at, t.SlotClock(replica, s))
		}
		if best < 0 || at < bestAt {
			best, bestAt = s, at
		}
	}
	return best
}

func (p *prefixPolicy) Warmed(key Key, home, src, replica, slot int) {
	held := p.tree(key.Salt).SlotHolds(home, src)
	if len(held) == 0 {
		return
	}
	w := Key{Salt: key.Salt, Tokens: held}
	p.RoutedSlot(w, replica, slot)
	p.Routed(w, replica)
}

// clientNamesSlot reports whether the body names a slot itself.
func clientNamesSlot(body []byte) bool {
	var q struct {
		IDSlot json.RawMessage `json:"id_slot"`
	}
	return json.Unmarshal(body, &q) == nil && q.IDSlot != nil
}

// withIDSlot returns body, a JSON object, with "id_slot": slot added as its
// first member; the rest of the bytes are the client's.
func withIDSlot(body []byte, slot int) []byte {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return body
	}
	field := `"id_slot":` + strconv.Itoa(slot)
	rest := trimmed[1:]
	if len(bytes.TrimSpace(rest)) > 0 && bytes.TrimSpace(rest)[0] != '}' {
		field += ","
	}
	out := make([]byte, 0, len(body)+len(field))
	out = append(out, body[:len(body)-len(trimmed)]...)
	out = append(out, '{')
	out = append(out, field...)
	return append(out, rest...)
}

// slotLoads returns the requests in flight on each slot of replica i.
func (rt *Router) slotLoads(i int) []int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]int(nil), rt.replicas[i].slots...)
}

// holdSlot counts a request (or a warm-up) on slot s of replica i.
func (rt *Router) holdSlot(i, s, d int) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.replicas[i].slots[s] += d
}

// warm copies the KV of the slot of replica home that holds key's longest
// prefix into a free slot of replica to: POST /slots/{src}?action=save on
// home, then /slots/{dst}?action=restore on to, through the directory the
// replicas share (llama-server's --slot-save-path). It returns the slot of
// to, held for the request, or -1 when there is nothing to copy, no free
// slot, or a replica refused.
func (rt *Router) warm(ctx context.Context, sp SlotPolicy, key Key, home, to int) int {
	rt.mu.Lock()
	src := sp.WarmSource(key, home, rt.replicas[home].slots)
	dst := -1
	if src >= 0 {
		dst = sp.FreeSlot(to, rt.replicas[to].slots)
	}
	if src >= 0 && dst >= 0 {
		rt.replicas[to].slots[dst]++
	}
	n := rt.warmSeq
	rt.warmSeq++
	rt.mu.Unlock()
	if src < 0 || dst < 0 {
		rt.metrics.warms.WithLabelValues("nothing").Inc()
		return -1
	}
	// Files are taken in turn from a ring of warmFiles names: two
	// warm-ups in flight never share one (a busy slot can be the source of
	// several), and the save directory holds at most warmFiles of them, as
	// llama-server has no call to delete one.
	name := fmt.Sprintf("kvlab-router-warm-%d.bin", n%warmFiles)
	err := rt.slotAction(ctx, home, src, "save", name)
	if err == nil {
		err = rt.slotAction(ctx, to, dst, "restore", name)
	}
	if err != nil {
		rt.holdSlot(to, dst, -1)
		rt.metrics.warms.WithLabelValues("failed").Inc()
		return -1
	}
	sp.Warmed(key, home, src, to, dst)
	rt.metrics.warms.WithLabelValues("ok").Inc()
	rt.warmed.Add(1)
	return dst
}

// warmFiles is how many slot files the router keeps in the replicas'
// save directory.
const warmFiles = 16

// slotAction asks replica i to save or restore slot s to or from file name.
func (rt *Router) slotAction(ctx context.Context, i, s int, action, name string) error {
	ctx, cancel := context.WithTimeout(ctx, rt.opts.ResponseTimeout) // a replica that never answers must not hold the slot
	defer cancel()
	body, _ := json.Marshal(map[string]string{"filename": name})
	u := fmt.Sprintf("%s/slots/%d?action=%s", rt.replicas[i].url, s, action)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("replica %d: %s slot %d: %d %s", i, action, s, resp.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}
