//go:build bench

package bench

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The figures are dot plots: for each category, each series' median over
// the runs, with a whisker from the smallest to the largest run (the
// spread), and the goals as dashed red lines.

var (
	blue   = color.RGBA{31, 119, 180, 255}
	orange = color.RGBA{255, 127, 14, 255}
	green  = color.RGBA{44, 160, 44, 255}
	purple = color.RGBA{148, 103, 189, 255}
	red    = color.RGBA{214, 39, 40, 255}
	grey   = color.RGBA{127, 127, 127, 255}
)

// dotSeries is one series: vals[i] are the runs' values for category i
// (none: nothing drawn there).
type dotSeries struct {
	name  string
	color color.Color
	vals  [][]float64
}

// goalLine is a horizontal line across the panel.
type goalLine struct {
	name  string
	y     float64
	color color.Color
}

// errPoints are medians with their spread, for plotter.NewYErrorBars.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// median, lo and hi of vals (which must not be empty).
func medianMinMax(vals []float64) (med, lo, hi float64) {
	s := slices.Clone(vals)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// dotPanel draws series over nominal categories.
func dotPanel(title, ylabel string, cats []string, series []dotSeries, goals []goalLine, logY bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	floor := func(v float64) float64 { return v }
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		floor = func(v float64) float64 { return math.Max(v, 0.01) } // a log axis has no 0
	}
	width := 0.5
	for si, s := range series {
		var pts errPoints
		for ci, vals := range s.vals {
			if len(vals) == 0 {
				continue
			}
			med, lo, hi := medianMinMax(vals)
			med, lo, hi = floor(med), floor(lo), floor(hi)
			x := float64(ci)
			if len(series) > 1 {
				x += -width/2 + width*float64(si)/float64(len(series)-1)
			}
			pts.XYs = append(pts.XYs, plotter.XY{X: x, Y: med})
			pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{med - lo, hi - med})
		}
		if len(pts.XYs) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Color = s.color
		sc.GlyphStyle.Radius = vg.Points(3)
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		eb, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return nil, err
		}
		eb.LineStyle.Color = s.color
		eb.LineStyle.Width = vg.Points(1.2)
		p.Add(eb, sc)
		p.Legend.Add(s.name, sc)
	}
	for _, g := range goals {
		if logY && g.y <= 0 {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: g.y}, {X: float64(len(cats)) - 0.5, Y: g.y}})
		if err != nil {
			return nil, err
		}
		l.LineStyle.Color = g.color
		l.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(g.name, l)
	}
	p.NominalX(cats...)
	p.X.Min, p.X.Max = -0.6, float64(len(cats))-0.4
	p.Add(plotter.NewGrid())
	if !logY && p.Y.Min > 0 {
		p.Y.Min = 0
	}
	if logY {
		p.Y.Max *= 4 // room for the legend
	} else {
		p.Y.Max *= 1.25
	}
	return p, nil
}

// savePanels writes panels (rows of plots) to a PNG.
func savePanels(path string, panels [][]*plot.Plot, w, h vg.Length) error {
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: len(panels[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(panels, tiles, dc)
	for j := range panels {
		for i, p := range panels[j] {
			p.Draw(canvases[j][i])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writePlot draws the load harness's figure: scheduling lateness p50 and
// p99, and CPU per 1,000 probes, against the container count, over the
// runs of each size.
func writePlot(path string, rs []Result) error {
	var sizes []int
	for _, r := range rs {
		if !slices.Contains(sizes, r.Containers) {
			sizes = append(sizes, r.Containers)
		}
	}
	cats := make([]string, len(sizes))
	p50, p99, cpu := make([][]float64, len(sizes)), make([][]float64, len(sizes)), make([][]float64, len(sizes))
	for i, n := range sizes {
		cats[i] = fmt.Sprintf("%d containers", n)
		for _, r := range rs {
			if r.Containers == n {
				p50[i] = append(p50[i], r.LatenessP50Ms)
				p99[i] = append(p99[i], r.LatenessP99Ms)
				cpu[i] = append(cpu[i], r.CPUPer1000Probes)
			}
		}
	}
	late, err := dotPanel("scheduling lateness", "ms (log scale)", cats,
		[]dotSeries{{"p50", blue, p50}, {"p99", orange, p99}}, []goalLine{{"goal: p99 ≤ 10 ms", 10, red}}, true)
	if err != nil {
		return err
	}
	c, err := dotPanel("CPU (agent, fake runtime and targets)", "CPU s per 1,000 probes", cats,
		[]dotSeries{{"CPU", green, cpu}}, nil, false)
	if err != nil {
		return err
	}
	return savePanels(path, [][]*plot.Plot{{late, c}}, vg.Points(760), vg.Points(300))
}
