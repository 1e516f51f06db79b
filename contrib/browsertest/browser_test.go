package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"image"
	"image/color"
	"image/png"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

var screenshots = flag.Bool("screenshots", false, "write the screenshots into docs/img, for docs/operations.md")

// requireEnv turns a missing browser from a skip into a failure.
const requireEnv = "FAIRLOCK_REQUIRE_BROWSER"

// A tab is one headless Chromium tab; its methods fail the test on an
// error.
type tab struct {
	t     *testing.T
	ctx   context.Context
	shots string // where screenshots go
}

// newTab starts Chromium with one tab, closed when the test ends; the
// test then fails if the page threw an exception or the browser refused
// anything under the page's Content-Security-Policy.
func newTab(t *testing.T) *tab {
	t.Helper()
	bin := os.Getenv("CHROMIUM")
	if bin == "" {
		bin = "chromium"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		if os.Getenv(requireEnv) != "" {
			t.Fatalf("%s not found and %s is set: %v (.ci/chromium installs it)", bin, requireEnv, err)
		}
		t.Skipf("%s not installed (.ci/chromium installs it; set %s=1 to make this a failure)", bin, requireEnv)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1000, 800),
		chromedp.Flag("hide-scrollbars", true), chromedp.Flag("font-render-hinting", "none"))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, bound to ctx and not to a timeout
		cancelAlloc()
		t.Fatalf("starting %s: %v", path, err)
	}
	problems := watchConsole(ctx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		for _, p := range problems() {
			t.Errorf("the browser's console: %s", p)
		}
	})
	tb := &tab{t: t, ctx: ctx, shots: t.TempDir()}
	if *screenshots {
		tb.shots = filepath.Join("..", "..", "docs", "img")
	}
	return tb
}

// watchConsole collects the page's exceptions and the browser's refusals
// under the Content-Security-Policy; the func returned, called once the
// tab is closed, returns them.
func watchConsole(ctx context.Context) func() []string {
	var mu sync.Mutex
	var found []string
	done := make(chan struct{})
	messages := chromedp.Console(ctx)
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
				mu.Lock()
				found = append(found, m.String())
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		<-done
		return found
	}
}

// do runs actions, within 10 s.
func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatal(err)
	}
}

// click clicks the element css finds, with the mouse, within 10 s. The
// page renders its rows anew at each reading (every 200 ms here), which
// can replace the element between chromedp's query and its click ("Could
// not find node with given id"): then it clicks the new one.
func (tb *tab) click(css string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	for {
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(css)))
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "Could not find node") || ctx.Err() != nil {
			tb.t.Fatalf("click %s: %v", css, err)
		}
	}
}

// eval evaluates a JavaScript expression in the page, into out.
func (tb *tab) eval(expression string, out any) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expression, chromedp.EvalAwaitPromise))
	if err == nil {
		err = json.Unmarshal(raw, out)
	}
	if err != nil {
		tb.t.Fatalf("%s: %v", expression, err)
	}
}

// await evaluates expression until it equals want, for 5 s at most: the
// page reads the locks again every 200 ms in these tests.
func (tb *tab) await(what, expression string, want any) {
	tb.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := reflect.New(reflect.TypeOf(want))
		tb.eval(expression, got.Interface())
		if reflect.DeepEqual(got.Elem().Interface(), want) {
			return
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("%s: the page shows %+v, want %+v", what, got.Elem().Interface(), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shot saves a screenshot as name.png: of the whole page, or of what the
// screen shows.
func (tb *tab) shot(name string, whole bool) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	take := chromedp.CaptureScreenshot()
	if whole {
		take = chromedp.FullScreenshot(100)
	}
	shot, err := chromedp.Run(ctx, take)
	if err != nil {
		tb.t.Fatal(err)
	}
	small, err := paletted(shot)
	if err != nil {
		tb.t.Fatal(err)
	}
	path := filepath.Join(tb.shots, name+".png")
	if err := os.WriteFile(path, small, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("screenshot %s: %d bytes (%d as the browser took it)", path, len(small), len(shot))
}

// paletted is a PNG again in its 256 most frequent colors: a page is a few
// flat colors and the anti-aliasing of its text, and the screenshots in
// the docs come out a third of the size, looking the same.
func paletted(data []byte) ([]byte, error) {
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	b := img.Bounds()
	count := map[color.Color]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			count[img.At(x, y)]++
		}
	}
	colors := slices.Collect(maps.Keys(count))
	slices.SortFunc(colors, func(c, d color.Color) int { return count[d] - count[c] })
	pal := color.Palette(colors[:min(256, len(colors))])
	index := map[color.Color]uint8{}
	for _, c := range colors {
		index[c] = uint8(pal.Index(c))
	}
	out := image.NewPaletted(b, pal)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			out.SetColorIndex(x, y, index[img.At(x, y)])
		}
	}
	var buf bytes.Buffer
	err = (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, out)
	return buf.Bytes(), err
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
