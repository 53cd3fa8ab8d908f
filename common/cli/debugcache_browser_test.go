//go:build browser

package cli

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The browser test of /debug/cache (make test-browser): headless Chromium
// loads the page from a live serve, requests change the cache, and the
// page must draw each new view it is sent, with no reload. With
// KVLAB_SCREENSHOT_DIR set it also writes the docs' screenshots there
// (make debug-screenshots).

// chromium is the browser binary: $CHROMIUM, else Debian's.
func chromium() string {
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// nodeColours are the page's node fills (debugcache.html's COLOUR).
var nodeColours = [][3]int{{0xe4, 0x57, 0x2e}, {0xf6, 0xc8, 0x5f}, {0x5b, 0x9b, 0xd5}, {0xc9, 0xd3, 0xd9}}

// sidePanel is the width of the page's side panel, whose colour keys are
// not nodes.
const sidePanel = 330

// nodePixels counts the pixels of a screenshot left of the side panel
// that have a node's fill colour.
func nodePixels(t *testing.T, shot []byte) int {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	require.NoError(t, err)
	b := img.Bounds()
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X-sidePanel; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			for _, c := range nodeColours {
				if near(int(r>>8), c[0]) && near(int(g>>8), c[1]) && near(int(bl>>8), c[2]) {
					n++
					break
				}
			}
		}
	}
	return n
}

func near(a, b int) bool { return a-b <= 4 && b-a <= 4 }

func TestBrowserDebugCacheDrawsLive(t *testing.T) {
	bin := chromium()
	if bin == "" && os.Getenv("KVLAB_REQUIRE_BROWSER") != "" {
		t.Fatal("no chromium binary (/usr/bin/chromium or $CHROMIUM), and KVLAB_REQUIRE_BROWSER is set (make test-browser): a skip would pass for a run that checked nothing")
	}
	if bin == "" {
		t.Skip("no chromium binary (/usr/bin/chromium or $CHROMIUM); make test-browser installs Debian's")
	}
	shots := os.Getenv("KVLAB_SCREENSHOT_DIR")
	if shots != "" {
		require.NoError(t, os.MkdirAll(shots, 0o755))
	}
	dir := smallModel(t, "llama")
	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-block-size", "4", "-blocks", "28", "-prefix-caching", "-ghosts", "-debug-cache")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.WindowSize(1500, 820))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelTab()
	require.NoError(t, chromedp.Do(bctx, chromedp.EmulateViewport(1500, 820), chromedp.Navigate(url+"/debug/cache"), chromedp.WaitVisible(chromedp.CSS("#cache"))))
	styled, err := chromedp.Run(bctx, chromedp.Evaluate[string](`getComputedStyle(document.body).display`))
	require.NoError(t, err)
	assert.Equal(t, "flex", styled, "the inline style ran under the page's CSP")

	// drawn is the node count the page drew last (its svg's data-nodes).
	drawn := func() int {
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`(() => { const s = document.getElementById("cache"); return s ? Number(s.dataset.nodes) : -1; })()`))
		require.NoError(t, err)
		return n
	}
	// seqDrawn is the seq of the view the page drew last.
	seqDrawn := func() int {
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`seq`))
		require.NoError(t, err)
		return n
	}
	// caughtUp waits until the engine has released every sequence and the
	// page has drawn the server's view of that, and returns its
	// screenshot.
	caughtUp := func(what string) (debugDoc, []byte) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			d := quietDebugDoc(t, url)
			if n := drawn(); n == len(d.View.Nodes) && d.Seq == uint64(seqDrawn()) {
				shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
				require.NoError(t, err)
				if shots != "" {
					require.NoError(t, os.WriteFile(filepath.Join(shots, "debug-cache-"+what+".png"), shot, 0o644))
				}
				return d, shot
			} else if time.Now().After(deadline) {
				t.Fatalf("%s: the page drew %d nodes, the server's view has %d", what, n, len(d.View.Nodes))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	system := seqIDs(10, 12) // a system prompt every request starts with
	ask := func(salt string, first int) {
		completion(t, url, debugPrompt(salt, append(append([]int{}, system...), seqIDs(first, 8)...)...))
	}

	for _, q := range []int{100, 120, 140} {
		ask("", q)
	}
	shared, shot := caughtUp("shared")
	sharedPixels := nodePixels(t, shot)
	assert.Positive(t, len(shared.View.Nodes))
	assert.Greater(t, sharedPixels, 20*len(shared.View.Nodes), "the screenshot shows the nodes")

	for _, q := range []int{100, 160} {
		ask("tenant-b", q)
	}
	tenants, shot := caughtUp("tenants")
	assert.Greater(t, len(tenants.View.Nodes), len(shared.View.Nodes))
	assert.Greater(t, nodePixels(t, shot), sharedPixels, "more nodes, more of their colour")

	for q := 0; q < 12 && getDebugDoc(t, url).Pool.Evicted == 0; q++ {
		ask("", 180+q*9)
	}
	ask("", 100) // its last block went first: it misses as evicted
	evicted, _ := caughtUp("evicted")
	assert.Positive(t, evicted.Misses["evicted"], "a prompt whose blocks were evicted")
	assert.Positive(t, evicted.Pool.Evicted, "the pool was small enough to evict")
	t.Logf("nodes drawn: %d shared, %d with a second tenant, %d after evictions (%d blocks evicted)",
		len(shared.View.Nodes), len(tenants.View.Nodes), len(evicted.View.Nodes), evicted.Pool.Evicted)

	cancelTab()
	stop()
	require.NoError(t, <-done, log.String())
}
