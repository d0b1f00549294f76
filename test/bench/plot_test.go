//go:build bench

package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// writePlot draws two panels against container count (log scale): probe
// scheduling lateness p50/p99, and CPU seconds per 1,000 probes.
func writePlot(path string, rs []Result) error {
	const panelW, panelH = 480, 320
	img := image.NewRGBA(image.Rect(0, 0, 2*panelW, panelH))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	xs := make([]float64, len(rs))
	p50, p99, cpu := make([]float64, len(rs)), make([]float64, len(rs)), make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = float64(r.Containers)
		p50[i], p99[i], cpu[i] = r.LatenessP50Ms, r.LatenessP99Ms, r.CPUPer1000Probes
	}
	blue := color.RGBA{31, 119, 180, 255}
	orange := color.RGBA{255, 127, 14, 255}
	green := color.RGBA{44, 160, 44, 255}
	drawPanel(img, image.Rect(0, 0, panelW, panelH), "scheduling lateness (ms, log scale)", xs,
		[]series{{"p50", blue, p50}, {"p99", orange, p99}}, 10, true)
	drawPanel(img, image.Rect(panelW, 0, 2*panelW, panelH), "CPU s per 1,000 probes", xs,
		[]series{{"cpu", green, cpu}}, 0, false)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

type series struct {
	name  string
	color color.Color
	ys    []float64
}

// drawPanel plots series against log10(x), and against log10(y) if logY
// (lateness spans 0.1 ms to seconds once the node saturates); target, when
// non-zero, is drawn as a dashed red line.
func drawPanel(img *image.RGBA, r image.Rectangle, title string, xs []float64, ss []series, target float64, logY bool) {
	const left, right, top, bottom = 60, 20, 30, 40
	plot := image.Rect(r.Min.X+left, r.Min.Y+top, r.Max.X-right, r.Max.Y-bottom)
	ymax := target
	for _, s := range ss {
		for _, y := range s.ys {
			if y >= 0 {
				ymax = math.Max(ymax, y)
			}
		}
	}
	ymax = niceCeil(ymax * 1.1)
	ymin, ticks := 0.0, []float64{0, ymax / 4, ymax / 2, 3 * ymax / 4, ymax}
	if logY {
		ymax = math.Pow(10, math.Ceil(math.Log10(ymax)))
		ymin, ticks = 0.1, nil
		for y := ymin; y <= ymax*1.001; y *= 10 {
			ticks = append(ticks, y)
		}
	}
	xmin, xmax := math.Log10(xs[0]), math.Log10(xs[len(xs)-1])
	if xmax == xmin {
		xmin, xmax = xmin-1, xmax+1
	}
	px := func(x float64) int {
		return plot.Min.X + int((math.Log10(x)-xmin)/(xmax-xmin)*float64(plot.Dx()))
	}
	py := func(y float64) int {
		frac := (y - ymin) / (ymax - ymin)
		if logY {
			frac = (math.Log10(math.Max(y, ymin)) - math.Log10(ymin)) / (math.Log10(ymax) - math.Log10(ymin))
		}
		return plot.Max.Y - int(frac*float64(plot.Dy()))
	}
	black := color.Black
	grey := color.RGBA{220, 220, 220, 255}
	label(img, r.Min.X+left, r.Min.Y+18, title, black)
	for _, y := range ticks {
		line(img, plot.Min.X, py(y), plot.Max.X, py(y), grey, false)
		label(img, r.Min.X+4, py(y)+4, trimFloat(y), black)
	}
	for _, x := range xs {
		line(img, px(x), plot.Min.Y, px(x), plot.Max.Y, grey, false)
		s := fmt.Sprint(x)
		label(img, min(px(x)-len(s)*7/2, r.Max.X-len(s)*7-2), plot.Max.Y+16, s, black)
	}
	label(img, plot.Min.X+plot.Dx()/2-40, plot.Max.Y+32, "containers", black)
	line(img, plot.Min.X, plot.Min.Y, plot.Min.X, plot.Max.Y, black, false)
	line(img, plot.Min.X, plot.Max.Y, plot.Max.X, plot.Max.Y, black, false)
	if target > 0 {
		red := color.RGBA{214, 39, 40, 255}
		line(img, plot.Min.X, py(target), plot.Max.X, py(target), red, true)
		label(img, plot.Max.X-60, py(target)-4, "target", red)
	}
	for i, s := range ss {
		for j := range s.ys {
			if s.ys[j] < 0 {
				continue
			}
			dot(img, px(xs[j]), py(s.ys[j]), s.color)
			if j > 0 && s.ys[j-1] >= 0 {
				line(img, px(xs[j-1]), py(s.ys[j-1]), px(xs[j]), py(s.ys[j]), s.color, false)
			}
		}
		label(img, plot.Min.X+10, plot.Min.Y+16+14*i, s.name, s.color)
	}
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3g", v)
	return s
}

func label(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func dot(img *image.RGBA, x, y int, c color.Color) {
	for dx := -2; dx <= 2; dx++ {
		for dy := -2; dy <= 2; dy++ {
			img.Set(x+dx, y+dy, c)
		}
	}
}

// line draws with Bresenham's algorithm, two pixels thick.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.Color, dashed bool) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for n := 0; ; n++ {
		if !dashed || (n/6)%2 == 0 {
			img.Set(x0, y0, c)
			img.Set(x0, y0+1, c)
		}
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int  { return max(v, -v) }
func sign(v int) int { return max(-1, min(1, v)) }
