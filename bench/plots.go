package main

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The plots are PNG, not SVG: an SVG of a few hundred points diffs as
// thousands of changed lines each run, a PNG of flat colours at 96 dpi is
// a few tens of KB.
const plotDPI = 96

// A plotSpec is one plot file in -out: panels stacked one above the
// other, each panelH high, beside a strip legendW wide with its legend (the
// legend never hides a line, wherever the data fall).
type plotSpec struct {
	file                   string
	width, panelH, legendW vg.Length
	panels                 func(res *Results) ([]*plot.Plot, error)
}

// plotSpecs are the plots every run draws; docs/benchmarks.md says what to
// look at in each.
var plotSpecs = []plotSpec{
	{"waits-contended.png", 9 * vg.Inch, 5 * vg.Inch, 2.5 * vg.Inch, contentionPlot},
	{"shares-tenants.png", 9 * vg.Inch, 2.6 * vg.Inch, 2.5 * vg.Inch, func(res *Results) ([]*plot.Plot, error) { return sharePlots(res.Tenants) }},
	{"shares-weighted.png", 9 * vg.Inch, 2.6 * vg.Inch, 2.5 * vg.Inch, func(res *Results) ([]*plot.Plot, error) { return sharePlots(res.WeightedTenants) }},
	{"waits-lanes.png", 9 * vg.Inch, 5 * vg.Inch, 2.5 * vg.Inch, lanePlot},
}

// drawPlots writes to dir every plot whose scenario res holds, and removes
// from dir those whose scenario it lacks: the plots in dir are always
// those of the results.json beside them.
func drawPlots(dir string, res *Results) error {
	var errs []error
	for _, s := range plotSpecs {
		path := filepath.Join(dir, s.file)
		panels, err := s.panels(res)
		switch {
		case err != nil:
		case len(panels) == 0:
			if err = os.Remove(path); errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		default:
			err = savePanels(path, panels, s)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.file, err))
		}
	}
	return errors.Join(errs...)
}

// savePanels draws panels as s lays them out into a PNG at path.
func savePanels(path string, panels []*plot.Plot, s plotSpec) error {
	c := vgimg.NewWith(vgimg.UseWH(s.width, s.panelH*vg.Length(len(panels))), vgimg.UseDPI(plotDPI), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(c)
	grid := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		grid[i] = []*plot.Plot{p}
	}
	pad := vg.Points(8)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: pad, PadBottom: pad, PadLeft: pad, PadRight: pad, PadY: 2 * pad}
	canvases := plot.Align(grid, tiles, draw.Crop(dc, 0, -s.legendW, 0, 0))
	for i, p := range panels {
		leg := p.Legend
		p.Legend = plot.NewLegend()
		pc := canvases[i][0]
		p.Draw(pc)
		strip := pc
		strip.Min.X, strip.Max.X = pc.Max.X+pad, dc.Max.X-pad
		strip.Max.Y -= 2 * pad // below the panel's title
		leg.Top, leg.Left = true, true
		leg.Draw(strip)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(f, paletted(c.Image())); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// paletted is img in at most 256 colours, its most frequent ones, every
// other pixel (an edge the antialiasing blended) given the nearest of
// them: a paletted PNG is half the size of an RGBA one, and a plot of flat
// colours looks the same in it.
func paletted(img image.Image) *image.Paletted {
	b := img.Bounds()
	counts := map[color.Color]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			counts[img.At(x, y)]++
		}
	}
	pal := make(color.Palette, 0, len(counts))
	for c := range counts {
		pal = append(pal, c)
	}
	sort.Slice(pal, func(i, j int) bool { return counts[pal[i]] > counts[pal[j]] })
	pal = pal[:min(len(pal), 256)]
	out := image.NewPaletted(b, pal)
	index := map[color.Color]uint8{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := img.At(x, y)
			i, ok := index[c]
			if !ok {
				i = uint8(pal.Index(c))
				index[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	return out
}

// plotColors are Okabe and Ito's colours, told apart by most colour-blind
// readers too: blue (fairlock's, as in chart.svg), vermilion, green,
// purple, orange (after purple: beside vermilion it is hard to tell from
// it in a thin line), sky blue, black.
var plotColors = []color.Color{
	color.RGBA{0x00, 0x72, 0xb2, 0xff},
	color.RGBA{0xd5, 0x5e, 0x00, 0xff},
	color.RGBA{0x00, 0x9e, 0x73, 0xff},
	color.RGBA{0xcc, 0x79, 0xa7, 0xff},
	color.RGBA{0xe6, 0x9f, 0x00, 0xff},
	color.RGBA{0x56, 0xb4, 0xe9, 0xff},
	color.RGBA{0x00, 0x00, 0x00, 0xff},
}

// plotDashes are the dash patterns of lines 0, 1, ...: a second cue beside
// the colour, for grey print.
var plotDashes = [][]vg.Length{
	nil,
	{vg.Points(6), vg.Points(3)},
	{vg.Points(2), vg.Points(2)},
	{vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)},
	{vg.Points(12), vg.Points(4)},
	{vg.Points(4), vg.Points(2), vg.Points(1), vg.Points(2)},
	{vg.Points(1), vg.Points(3)},
}

// lineStyle is the style of line i; bold lines are wider.
func lineStyle(i int, bold bool) draw.LineStyle {
	w := vg.Points(1.6)
	if bold {
		w = vg.Points(2.8)
	}
	return draw.LineStyle{Color: plotColors[i%len(plotColors)], Width: w, Dashes: plotDashes[i%len(plotDashes)]}
}

// logAxis makes a a log axis, given the log10 of the values plotted on
// it: gonum's own log scale places a rotated axis label by the linear
// midpoint of the range, which on a log range of several decades pads the
// plot far below its title. Ticks run at 1 to 9 times each power of ten,
// the powers labelled label(v) and the axis snapped to whole decades.
func logAxis(a *plot.Axis, label func(float64) string) {
	a.Min, a.Max = math.Floor(a.Min), math.Ceil(a.Max)
	a.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var ts []plot.Tick
		for e := math.Floor(lo); e <= hi; e++ {
			for m := 1.0; m < 10; m++ {
				if v := e + math.Log10(m); v >= lo-1e-9 && v <= hi+1e-9 {
					t := plot.Tick{Value: v}
					if m == 1 {
						t.Label = label(math.Pow(10, e))
					}
					ts = append(ts, t)
				}
			}
		}
		return ts
	})
}

// plotFontSize is the size of a plot's texts, in points, its legend's one
// less: gonum's 12 crowds a legend beside a 9-inch plot.
const plotFontSize = 11

// newPlot is an empty plot titled title, in a sans-serif face (gonum's
// default is a serif), with light grid lines at the labelled ticks.
func newPlot(title string) *plot.Plot {
	p := plot.New()
	for _, sty := range []*text.Style{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle, &p.X.Tick.Label, &p.Y.Tick.Label, &p.Legend.TextStyle} {
		sty.Font.Variant = "Sans"
		sty.Font.Size = vg.Points(plotFontSize)
	}
	p.Legend.TextStyle.Font.Size = vg.Points(plotFontSize - 1)
	p.Title.Text = title
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = color.Gray{Y: 0xd0}, color.Gray{Y: 0xd0}
	p.Add(g)
	return p
}

// ccdfPlot is an empty plot of distributions of waits, each drawn as the
// fraction of waits longer than x against x, both on log scales: the body
// of a distribution and its tail down to a single wait in one frame, and
// a line crosses 1% at its p99. Lines go on with addCCDF; finishCCDF sets
// the axes once they are all in.
func ccdfPlot(title string) *plot.Plot {
	p := newPlot(title)
	p.X.Label.Text = "wait x, from the acquire call to the grant (ms, log scale)"
	p.Y.Label.Text = "waits longer than x (log scale)"
	return p
}

// finishCCDF snaps p's axes to whole decades and labels their ticks.
func finishCCDF(p *plot.Plot) {
	logAxis(&p.X, func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) })
	logAxis(&p.Y, func(v float64) string { return strconv.FormatFloat(100*v, 'g', -1, 64) + "%" })
}

// addCCDF draws h on p in style, labelled in the legend.
func addCCDF(p *plot.Plot, h *WaitHist, label string, style draw.LineStyle) error {
	xs, fracs := h.ccdf()
	pts := make(plotter.XYs, len(xs))
	for i := range xs {
		pts[i] = plotter.XY{X: math.Log10(xs[i] / 1e3), Y: math.Log10(fracs[i])}
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.LineStyle = style
	p.Add(l)
	p.Legend.Add(label, l)
	return nil
}

// contentionPlot is the contended scenario's waits, one line per peer: the
// in-process variant that chart.svg draws.
func contentionPlot(res *Results) ([]*plot.Plot, error) {
	var rows []ContendedResult
	for _, c := range firstVariant(res) {
		if c.WaitHist != nil {
			rows = append(rows, c)
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	r0 := rows[0]
	p := ccdfPlot(fmt.Sprintf("Waits under contention (run of %s)\n%d workers on one lock, hold %.0f ms, %.0f s per peer", res.Meta.Date, r0.Workers, r0.HoldMs, r0.DurationS))
	for i, c := range rows {
		label := fmt.Sprintf("%s: p99 %.1f ms", c.Peer, c.WaitP99us/1e3)
		if err := addCCDF(p, c.WaitHist, label, lineStyle(i, c.Peer == "fairlock")); err != nil {
			return nil, err
		}
	}
	finishCCDF(p)
	return []*plot.Plot{p}, nil
}

// lanePlot is the priority-lanes scenario's waits, per lane, with
// priorities (solid) and without (dashed); the saturated row is left out,
// its point being the batch workers' bound, which the table gives.
func lanePlot(res *Results) ([]*plot.Plot, error) {
	rows := []*KindResult{laneRow(res.PriorityLanes, true, false), laneRow(res.PriorityLanes, false, false)}
	var p *plot.Plot
	for i, r := range rows {
		if r == nil || r.Lanes.BatchWaits == nil && r.Lanes.InteractiveWaits == nil {
			continue
		}
		l := r.Lanes
		if p == nil {
			p = ccdfPlot(fmt.Sprintf("Priority lanes, capacity %d: %d batch workers, %d interactive (pause %.0f ms)\nhold %.0f ms, %.0f s per row; solid: with priorities, dashed: FIFO",
				r.Capacity, l.BatchWorkers, l.InteractiveWorkers, l.PauseMs, r.HoldMs, r.DurationS))
		}
		how := "priorities"
		if i == 1 {
			how = "FIFO"
		}
		lanes := []struct {
			name string
			h    *WaitHist
			f    grantFigures
		}{{"interactive", l.InteractiveWaits, l.Interactive}, {"batch", l.BatchWaits, l.Batch}}
		for j, lane := range lanes {
			if lane.h == nil {
				continue
			}
			// FIFO's two lanes wait alike: their lines, dashed
			// differently, show through each other.
			style := lineStyle(j, i == 0)
			style.Dashes = plotDashes[i*(1+j)]
			if err := addCCDF(p, lane.h, fmt.Sprintf("%s, %s: p99 %.1f ms", lane.name, how, lane.f.WaitP99us/1e3), style); err != nil {
				return nil, err
			}
		}
	}
	if p == nil {
		return nil, nil
	}
	finishCCDF(p)
	return []*plot.Plot{p}, nil
}

// sharePlots are the tenants' shares over time, one panel per row of rows
// (a tenants or a weighted tenants scenario).
func sharePlots(rows []KindResult) ([]*plot.Plot, error) {
	var ps []*plot.Plot
	for _, r := range rows {
		if r.ShareBucketMs == 0 || len(r.Tenants) == 0 {
			continue
		}
		p, err := sharePlot(r)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// sharePlot is one tenants row's share of grants of each tenant, bucket by
// bucket of its window, with each tenant's fair share dashed.
func sharePlot(r KindResult) (*plot.Plot, error) {
	p := newPlot(fmt.Sprintf("%s: capacity %d, %d workers, hold %.0f ms", r.Peer, r.Capacity, r.Workers, r.HoldMs))
	p.X.Label.Text = fmt.Sprintf("time into the row's run (s), in buckets of %.0f ms", r.ShareBucketMs)
	p.Y.Label.Text = "share of grants (%)"
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, 100
	p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 25, Label: "25"}, {Value: 50, Label: "50"}, {Value: 75, Label: "75"}, {Value: 100, Label: "100"}}
	totals := make([]int, len(r.Tenants[0].GrantsPerBucket))
	for _, t := range r.Tenants {
		for b, n := range t.GrantsPerBucket {
			totals[b] += n
		}
	}
	width := r.ShareBucketMs / 1e3
	for i, t := range r.Tenants {
		var pts plotter.XYs
		for b, n := range t.GrantsPerBucket {
			if totals[b] > 0 {
				pts = append(pts, plotter.XY{X: (float64(b) + 0.5) * width, Y: 100 * float64(n) / float64(totals[b])})
			}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.LineStyle = lineStyle(i, false)
		l.LineStyle.Dashes = nil
		p.Add(l)
		p.Legend.Add(shareLabel(t), l)
	}
	return p, addFairShares(p, r.Tenants, float64(len(totals))*width)
}

// addFairShares draws each tenant's fair share across the window [0, end],
// dashed: one grey line when all are even, else one in each tenant's
// colour.
func addFairShares(p *plot.Plot, ts []TenantFigures, end float64) error {
	even := true
	for _, t := range ts {
		even = even && t.FairShare == ts[0].FairShare
	}
	dashed := draw.LineStyle{Color: color.Gray{Y: 0x60}, Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(5), vg.Points(4)}}
	label := fmt.Sprintf("even share, %.0f%% (dashed)", 100*ts[0].FairShare)
	if !even {
		label = "share by weight (dashed)"
	}
	for i, t := range ts {
		f, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 100 * t.FairShare}, {X: end, Y: 100 * t.FairShare}})
		if err != nil {
			return err
		}
		f.LineStyle = dashed
		if !even {
			f.LineStyle.Color = plotColors[i%len(plotColors)]
		}
		p.Add(f)
		if even {
			break
		}
	}
	p.Legend.Add(label, &plotter.Line{LineStyle: dashed})
	return nil
}

// shareLabel is a tenant's legend entry: its workers, weight, and share of
// the row's grants.
func shareLabel(t TenantFigures) string {
	who := fmt.Sprintf("%d workers", t.Workers)
	if t.Workers == 1 {
		who = "1 worker"
	}
	if t.Weight > 0 {
		who += fmt.Sprintf(", weight %d", t.Weight)
	}
	return fmt.Sprintf("%s (%s): %.1f%%", t.Name, who, 100*t.Share)
}
