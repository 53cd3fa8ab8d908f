package router

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeSlots is a llama-server stand-in with n slots, each holding the
// last prompt it ran, over real HTTP. /completion runs in the slot the
// body names (id_slot), or else in the idle slot whose prompt shares the
// longest prefix, else an empty idle one, else the lowest idle one; its
// answer says id_slot, and timings.cache_n is the prefix the slot shared
// (minus the last prompt token, which llama-server always evaluates),
// while tokens_cached is what llama-server puts there: every token the
// slot then holds. A request whose prompt ends with the token gate waits
// until release is closed. /slots/{id}?action=save|restore move a slot's prompt through
// files, a map shared by the fakes as llama-server replicas share a
// --slot-save-path.
type fakeSlots struct {
	srv     *httptest.Server
	files   map[string][]int32 // shared
	filesMu *sync.Mutex
	gate    int32
	release chan struct{}

	mu      sync.Mutex
	held    [][]int32 // per slot
	busy    []int
	got     []received
	actions []string // "save 0 name", "restore 1 name"
	cacheN  int      // the cache_n of every answer, summed
}

func newFakeSlots(t *testing.T, n int, files map[string][]int32, filesMu *sync.Mutex, release chan struct{}) *fakeSlots {
	f := &fakeSlots{files: files, filesMu: filesMu, gate: -7, release: release, held: make([][]int32, n), busy: make([]int, n)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSlots) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/health":
		w.Write([]byte(`{"status":"ok"}`))
	case strings.HasPrefix(r.URL.Path, "/slots/"):
		f.slotAction(w, r, body)
	case r.URL.Path == "/completion":
		f.complete(w, body)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeSlots) complete(w http.ResponseWriter, body []byte) {
	var q struct {
		Prompt []int32 `json:"prompt"`
		IDSlot *int    `json:"id_slot"`
	}
	if err := json.Unmarshal(body, &q); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.got = append(f.got, received{"/completion", body})
	slot := -1
	if q.IDSlot != nil {
		slot = *q.IDSlot
	} else {
		best := 0
		for s := range f.held {
			if l := commonLen(f.held[s], q.Prompt); f.busy[s] == 0 && l > best {
				slot, best = s, l
			}
		}
		for s := range f.held {
			if slot < 0 && f.busy[s] == 0 && len(f.held[s]) == 0 {
				slot = s
			}
		}
		for s := range f.held {
			if slot < 0 && f.busy[s] == 0 {
				slot = s
			}
		}
		slot = max(slot, 0)
	}
	cached := min(commonLen(f.held[slot], q.Prompt), len(q.Prompt)-1)
	f.busy[slot]++
	f.cacheN += cached
	f.mu.Unlock()
	if len(q.Prompt) > 0 && q.Prompt[len(q.Prompt)-1] == f.gate {
		<-f.release
	}
	f.mu.Lock()
	f.busy[slot]--
	f.held[slot] = append(append([]int32(nil), q.Prompt...), 9) // one generated token
	f.mu.Unlock()
	fmt.Fprintf(w, `{"content":"x","tokens":[9],"id_slot":%d,"stop":true,"tokens_predicted":1,"tokens_evaluated":%d,"tokens_cached":%d,"timings":{"cache_n":%d,"prompt_n":%d}}`,
		slot, len(q.Prompt), len(q.Prompt), cached, len(q.Prompt)-cached)
}

func (f *fakeSlots) slotAction(w http.ResponseWriter, r *http.Request, body []byte) {
	s, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/slots/"))
	if err != nil || s < 0 || s >= len(f.held) {
		http.Error(w, `{"error":{"message":"Invalid slot ID"}}`, http.StatusBadRequest)
		return
	}
	var q struct {
		Filename string `json:"filename"`
	}
	json.Unmarshal(body, &q)
	action := r.URL.Query().Get("action")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = append(f.actions, fmt.Sprintf("%s %d %s", action, s, q.Filename))
	f.filesMu.Lock()
	defer f.filesMu.Unlock()
	switch action {
	case "save":
		f.files[q.Filename] = append([]int32(nil), f.held[s]...)
		fmt.Fprintf(w, `{"id_slot":%d,"filename":%q,"n_saved":%d}`, s, q.Filename, len(f.held[s]))
	case "restore":
		f.held[s] = append([]int32(nil), f.files[q.Filename]...)
		fmt.Fprintf(w, `{"id_slot":%d,"filename":%q,"n_restored":%d}`, s, q.Filename, len(f.held[s]))
	default:
		http.Error(w, `{"error":{"message":"Invalid action"}}`, http.StatusBadRequest)
	}
}

func (f *fakeSlots) received() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.got...)
}

// sentSlot is the id_slot of a body, -1 if it has none.
func sentSlot(t *testing.T, body []byte) int {
	t.Helper()
	var q struct {
		IDSlot *int `json:"id_slot"`
	}
	require.NoError(t, json.Unmarshal(body, &q), string(body))
	if q.IDSlot == nil {
		return -1
	}
	return *q.IDSlot
}

// lastBody is the body of the last request f received.
func (f *fakeSlots) lastBody() []byte {
	got := f.received()
	return got[len(got)-1].Body
}

// busyCount is how many requests f is running.
func (f *fakeSlots) busyCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, b := range f.busy {
		n += b
	}
	return n
}

// waitBusy waits until f runs n requests.
func waitBusy(t *testing.T, f *fakeSlots, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return f.busyCount() == n }, 30*time.Second, 5*time.Millisecond, "the fake never ran %d requests at once", n)
}

func completionJSON(t *testing.T, prompt []int32) string {
	return string(jsonBody(t, map[string]any{"prompt": prompt, "n_predict": 1}))
}

// TestSlotsSendATurnToTheSlotHoldingItsPrefix: one replica of two slots.
// Conversation A's first turn and B's (another system prompt) go where the
// replica puts them — the router knows no slot yet and names none — and
// the router learns their slots from the answers' id_slot. A's next turn
// arrives while A's slot is still busy with another of A's requests; the
// replica would give it the idle slot, B's, and lose both A's prefix and
// B's conversation. The router must name A's slot: the client's bytes
// with "id_slot":N added in front and nothing else changed. A body that
// names its own slot is sent as it came, and the hits the router counts
// are the replica's timings.cache_n, not its tokens_cached (every token
// the slot holds, which would count more than the prompts).
func TestSlotsSendATurnToTheSlotHoldingItsPrefix(t *testing.T) {
	release := make(chan struct{})
	rep := newFakeSlots(t, 2, map[string][]int32{}, &sync.Mutex{}, release)
	rt, url := startRouter(t, Options{Replicas: []string{rep.srv.URL}, Policy: NewPrefixSlots(0.5, 0, 2, false), Slots: 2})
	send := func(body string) {
		t.Helper()
		status, _, raw := post(t, url+"/completion", body)
		require.Equal(t, http.StatusOK, status, string(raw))
	}

	a1, b1 := cat(seq(1000, 40), seq(1, 6)), cat(seq(2000, 40), seq(1, 6))
	send(completionJSON(t, a1))
	assert.Equal(t, -1, sentSlot(t, rep.lastBody()), "nothing known yet: the replica chooses")
	send(completionJSON(t, b1))
	assert.Equal(t, -1, sentSlot(t, rep.lastBody()), "B's prompt matches no slot: the replica chooses")
	require.Equal(t, [][]int32{cat(a1, []int32{9}), cat(b1, []int32{9})}, rep.held, "the fake put A in slot 0 and B in the empty slot 1")

	// A's second turn, held in slot 0 until release.
	a2 := cat(a1, []int32{9}, seq(50, 4), []int32{rep.gate})
	done := make(chan struct{})
	go func() {
		defer close(done)
		status, _, raw := post(t, url+"/completion", completionJSON(t, a2))
		assert.Equal(t, http.StatusOK, status, string(raw))
	}()
	waitBusy(t, rep, 1)
	assert.Equal(t, 0, sentSlot(t, rep.lastBody()), "A's second turn: the slot holding A's first")

	// A branch of A's conversation while slot 0 is busy: it waits for
	// slot 0 rather than take B's.
	branch := completionJSON(t, cat(a1, []int32{9}, seq(60, 4)))
	send(branch)
	assert.Equal(t, `{"id_slot":0,`+strings.TrimPrefix(branch, "{"), string(rep.lastBody()), "the client's bytes with id_slot added, nothing else")
	close(release)
	<-done

	// B's next turn still finds B in slot 1.
	send(completionJSON(t, cat(b1, []int32{9}, seq(70, 4))))
	assert.Equal(t, 1, sentSlot(t, rep.lastBody()))

	// The client's own choice is not overruled.
	own := string(jsonBody(t, map[string]any{"prompt": a1, "n_predict": 1, "id_slot": 1}))
	send(own)
	assert.Equal(t, own, string(rep.lastBody()))

	for deadline := time.Now().Add(10 * time.Second); rt.InFlight() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	st := rt.Stats()[0]
	rep.mu.Lock()
	cacheN := rep.cacheN
	rep.mu.Unlock()
	assert.Equal(t, cacheN, st.CachedTokens, "the router's hits are the replica's cache_n summed")
	assert.Greater(t, st.CachedTokens, 2*40, "A's turns found their prefix")
	assert.Equal(t, 1.0, metricValue(t, url, "kvlab_router:slot_decisions_total", `how="client"`))
}

// TestSlotWarmCopiesThePrefixToTheReplicaTakingTheOverflow: two replicas
// of one slot each, +warm. A's system prompt lives on one replica; four
// of its requests held there fill it (a slot busy and as many waiting), so
// a fifth goes to the other replica — and before it is sent, the router
// saves the prefix's slot on the full replica and restores the file into
// the other replica's slot, where the request, naming that slot, finds
// its system prompt cached.
func TestSlotWarmCopiesThePrefixToTheReplicaTakingTheOverflow(t *testing.T) {
	release := make(chan struct{})
	files, mu := map[string][]int32{}, &sync.Mutex{}
	reps := []*fakeSlots{newFakeSlots(t, 1, files, mu, release), newFakeSlots(t, 1, files, mu, release)}
	rt, url := startRouter(t, Options{Replicas: []string{reps[0].srv.URL, reps[1].srv.URL}, Policy: NewPrefixSlots(0.5, 0, 1, true), Slots: 1, WarmSlots: true})
	system := seq(1000, 40)
	status, home, raw := post(t, url+"/completion", completionJSON(t, cat(system, seq(1, 6))))
	require.Equal(t, http.StatusOK, status, string(raw))
	other := 1 - home

	var wg sync.WaitGroup
	for k := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, rep, raw := post(t, url+"/completion", completionJSON(t, cat(system, seq(100+10*k, 4), []int32{reps[home].gate})))
			assert.Equal(t, http.StatusOK, status, string(raw))
			assert.Equal(t, home, rep, "a held request stays with its prefix")
		}()
		// Both name slot 0 of home; the fake runs them side by side.
		waitBusy(t, reps[home], k+1)
	}
	status, rep, raw := post(t, url+"/completion", completionJSON(t, cat(system, seq(300, 6))))
	require.Equal(t, http.StatusOK, status, string(raw))
	assert.Equal(t, other, rep, "the prefix's replica is full: the request goes to the other")
	assert.Equal(t, []string{"save 0 kvlab-router-warm-0.bin"}, reps[home].actions)
	assert.Equal(t, []string{"restore 0 kvlab-router-warm-0.bin"}, reps[other].actions)
	assert.Equal(t, 0, sentSlot(t, reps[other].lastBody()), "the request names the restored slot")
	var answer struct {
		Timings struct {
			CacheN int `json:"cache_n"`
		} `json:"timings"`
	}
	require.NoError(t, json.Unmarshal(raw, &answer))
	assert.Equal(t, 40, answer.Timings.CacheN, "the system prompt was found in the restored slot")
	assert.Equal(t, 1, rt.Warms())
	close(release)
	wg.Wait()
}

// TestTreeSlotHoldsOnlyItsLastPrompt: a slot's marks move with its last
// prompt, while the replica's add up; splitting a slot's last edge keeps
// its path whole, and a replica that leaves takes its slots with it.
func TestTreeSlotHoldsOnlyItsLastPrompt(t *testing.T) {
	tr := NewTree(0)
	a, b := cat(seq(1, 4), seq(10, 4)), cat(seq(1, 4), seq(20, 4))
	tr.Insert(a, 0)
	tr.InsertSlot(a, 0, 1)
	assert.Equal(t, map[int]int{1: 8}, tr.MatchSlots(a, 0))
	tr.Insert(b, 0)
	tr.InsertSlot(b, 0, 1) // slot 1 now holds b only
	assert.Equal(t, map[int]int{1: 4}, tr.MatchSlots(a, 0), "only the shared head of a is left in slot 1")
	assert.Equal(t, map[int]int{1: 8}, tr.MatchSlots(b, 0))
	assert.Equal(t, map[int]int{0: 8}, tr.Match(a), "the replica still holds a")
	assert.Empty(t, tr.MatchSlots(a, 1), "another replica's slots are not this one's")

	// A prompt that ends inside the slot's last edge splits it; the slot
	// still holds all of b, and replacing it leaves nothing of b behind.
	tr.InsertSlot(b[:6], 0, 0)
	assert.Equal(t, b, tr.SlotHolds(0, 1))
	tr.InsertSlot(seq(90, 3), 0, 1)
	assert.Equal(t, map[int]int{0: 6}, tr.MatchSlots(b, 0))
	assert.Equal(t, seq(90, 3), tr.SlotHolds(0, 1))

	tr.Remove(0)
	assert.Empty(t, tr.MatchSlots(b, 0))
	assert.Empty(t, tr.Match(a))
	assert.Zero(t, tr.SlotClock(0, 1))
}

// TestPickSlotPrefersAnIdleMatchThenWaitsForTheBest: the slot choice on
// its own. Below the threshold nothing is named.
func TestPickSlotPrefersAnIdleMatchThenWaitsForTheBest(t *testing.T) {
	p := NewPrefixSlots(0.5, 0, 3, false)
	sys := seq(1000, 20)
	p.RoutedSlot(Key{Tokens: cat(sys, seq(1, 10))}, 0, 0)
	p.RoutedSlot(Key{Tokens: cat(sys, seq(50, 10))}, 0, 1)
	p.RoutedSlot(Key{Tokens: seq(3000, 30)}, 0, 2)
	next := Key{Tokens: cat(sys, seq(1, 10), seq(7, 4))}
	assert.Equal(t, 0, p.PickSlot(next, 0, []int{0, 0, 0}), "the longest match")
	assert.Equal(t, 1, p.PickSlot(next, 0, []int{1, 0, 0}), "busy: an idle slot holding the system prompt")
	assert.Equal(t, 0, p.PickSlot(next, 0, []int{1, 1, 0}), "no idle match: wait for the longest")
	assert.Equal(t, -1, p.PickSlot(Key{Tokens: seq(5000, 30)}, 0, []int{0, 0, 0}), "no match: the replica chooses")
	assert.Equal(t, -1, p.PickSlot(next, 1, []int{0, 0, 0}), "replica 1's slots hold nothing")
	assert.Equal(t, 0, p.FreeSlot(0, []int{0, 0, 0}), "slot 0 ran least recently")
	assert.Equal(t, 1, p.FreeSlot(0, []int{1, 0, 0}), "then slot 1")
	assert.Equal(t, -1, p.FreeSlot(0, []int{1, 1, 2}), "none is idle")
}

// TestWithIDSlotAddsOneField: the one change the router makes to a body.
func TestWithIDSlotAddsOneField(t *testing.T) {
	assert.Equal(t, `{"id_slot":3,"prompt":[1,2]}`, string(withIDSlot([]byte(`{"prompt":[1,2]}`), 3)))
	assert.Equal(t, `  {"id_slot":0, "prompt": "x" }`, string(withIDSlot([]byte(`  { "prompt": "x" }`), 0)))
	assert.Equal(t, `{"id_slot":1}`, string(withIDSlot([]byte(`{}`), 1)))
	assert.True(t, clientNamesSlot([]byte(`{"id_slot":-1}`)))
	assert.False(t, clientNamesSlot([]byte(`{"prompt":"id_slot"}`)))
}

// TestFailedWarmGivesItsSlotBack: as in the overflow test above, a fifth
// request of A's goes to the other replica, but that replica refuses the
// restore (500). The request is still served there, and once every
// request is done no slot of either replica is still counted busy: a
// failed warm-up must give back the slot it held, or the router would
// believe that slot busy for ever and never warm or name it again.
func TestFailedWarmGivesItsSlotBack(t *testing.T) {
	release := make(chan struct{})
	files, mu := map[string][]int32{}, &sync.Mutex{}
	reps := []*fakeSlots{newFakeSlots(t, 1, files, mu, release), newFakeSlots(t, 1, files, mu, release)}
	// The second replica's /slots fail; everything else it serves as usual.
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/slots/") {
			http.Error(w, `{"error":{"message":"restore failed"}}`, http.StatusInternalServerError)
			return
		}
		reps[1].serve(w, r)
	}))
	t.Cleanup(refusing.Close)
	rt, url := startRouter(t, Options{Replicas: []string{reps[0].srv.URL, refusing.URL}, Policy: NewPrefixSlots(0.5, 0, 1, true), Slots: 1, WarmSlots: true})
	system := seq(1000, 40)
	// Pin the prefix on replica 0: replica 1 is out while A's first turn is routed.
	rt.markDown(1, nil)
	status, home, raw := post(t, url+"/completion", completionJSON(t, cat(system, seq(1, 6))))
	require.Equal(t, http.StatusOK, status, string(raw))
	require.Equal(t, 0, home)
	rt.markUp(1)

	var wg sync.WaitGroup
	for k := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _, raw := post(t, url+"/completion", completionJSON(t, cat(system, seq(100+10*k, 4), []int32{reps[0].gate})))
			assert.Equal(t, http.StatusOK, status, string(raw))
		}()
		waitBusy(t, reps[0], k+1)
	}
	status, rep, raw := post(t, url+"/completion", completionJSON(t, cat(system, seq(300, 6))))
	require.Equal(t, http.StatusOK, status, string(raw))
	assert.Equal(t, 1, rep, "the prefix's replica is full: the request goes to the other")
	assert.Equal(t, 1.0, metricValue(t, url, "kvlab_router:slot_warms_total", `result="failed"`))
	assert.Equal(t, 0, rt.Warms())
	close(release)
	wg.Wait()
	require.Eventually(t, func() bool { return rt.InFlight() == 0 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []int{0}, rt.slotLoads(0))
	assert.Equal(t, []int{0}, rt.slotLoads(1), "the failed warm-up still holds the slot it was to restore into")
}

// TestTreeMatchCountsOnlyTheReplicasOwnMarks: a slot's mark outlives the
// replica's own on a path the replica evicted (a node a slot marks stays
// in the tree for the slot). Match is what the replica holds: it must not
// count the slot's mark, or the prefix policy would send a prompt to a
// replica whose cache let it go.
func TestTreeMatchCountsOnlyTheReplicasOwnMarks(t *testing.T) {
	tr := NewTree(8) // one prompt of 8 tokens per replica
	a, b := seq(1, 8), seq(100, 8)
	tr.Insert(a, 0)
	tr.InsertSlot(a, 0, 0)
	tr.Insert(b, 0) // evicts a for replica 0; slot 0 still ran a last
	assert.Equal(t, map[int]int{0: 8}, tr.MatchSlots(a, 0), "the slot still holds a")
	assert.Empty(t, tr.Match(a), "replica 0 evicted a: no replica holds it")
	assert.Equal(t, map[int]int{0: 8}, tr.Match(b))

	// A slot mark alone, on another replica, is not that replica's either.
	tr.InsertSlot(seq(200, 4), 1, 0)
	assert.Empty(t, tr.Match(seq(200, 4)))
}
