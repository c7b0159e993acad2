package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// backlogPoint is the number of committed but unconfirmed messages at a
// moment of a steady run.
type backlogPoint struct {
	At      float64 // seconds since the producers started
	Backlog int64
}

// curve is a latency percentile curve: the latency in milliseconds at each
// of plotQuantiles.
type curve struct {
	name  string
	color string
	ms    []float64
}

// plotQuantiles are the percentiles the latency curve is drawn through,
// spaced evenly in "nines" (the x axis is −log10(1 − q)).
var plotQuantiles = func() []float64 {
	var qs []float64
	for x := 0.0; x <= 5.0001; x += 0.05 {
		qs = append(qs, 100*(1-math.Pow(10, -x)))
	}
	return qs
}()

// curve returns h's latency at every plot quantile.
func (h *hist) curve(name, color string) curve {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := curve{name: name, color: color}
	for _, q := range plotQuantiles {
		c.ms = append(c.ms, float64(h.h.ValueAtQuantile(q))/1000)
	}
	return c
}

// writePlot draws a steady run as an SVG file at path: the latency
// percentile curves above, the backlog over time below.
func writePlot(path, title, subtitle string, curves []curve, backlog []backlogPoint) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	drawPlot(f, title, subtitle, curves, backlog)
	if err := f.Close(); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}

// The drawing's geometry, in SVG user units.
const (
	plotW, plotH   = 900, 640
	padL, padR     = 70, 30
	latTop, latBot = 60, 370
	blTop, blBot   = 440, 590
)

func drawPlot(w io.Writer, title, subtitle string, curves []curve, backlog []backlogPoint) {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="16" font-weight="bold">%s</text>`+"\n", padL, escapeXML(title))
	fmt.Fprintf(&b, `<text x="%d" y="46" fill="#555">%s</text>`+"\n", padL, escapeXML(subtitle))

	// Latency by percentile.
	maxMS := 0.0
	for _, c := range curves {
		for _, v := range c.ms {
			maxMS = max(maxMS, v)
		}
	}
	yMax := niceCeil(maxMS)
	x := func(i int) float64 {
		return padL + float64(i)/float64(len(plotQuantiles)-1)*(plotW-padL-padR)
	}
	yLat := func(v float64) float64 { return latBot - v/yMax*(latBot-latTop) }
	axes(&b, latTop, latBot)
	for i, label := range []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%"} {
		px := x(i * (len(plotQuantiles) - 1) / 5)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px, latTop, px, latBot, px, latBot+16, label)
	}
	yTicks(&b, latTop, latBot, yMax, "ms")
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">percentile</text>`+"\n", (plotW+padL)/2, latBot+34)
	for k, c := range curves {
		var pts []string
		for i, v := range c.ms {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), yLat(v)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c.color, strings.Join(pts, " "))
		ly := latTop + 16 + 18*k
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text>`+"\n",
			padL+12, ly-4, padL+36, ly-4, c.color, padL+42, ly, escapeXML(c.name))
	}

	// Backlog over time.
	maxT, maxB := 1.0, 0.0
	for _, p := range backlog {
		maxT = max(maxT, p.At)
		maxB = max(maxB, float64(p.Backlog))
	}
	bMax := max(niceCeil(maxB), 4) // whole messages on the ticks
	xt := func(t float64) float64 { return padL + t/maxT*(plotW-padL-padR) }
	yb := func(v float64) float64 { return blBot - v/bMax*(blBot-blTop) }
	axes(&b, blTop, blBot)
	yTicks(&b, blTop, blBot, bMax, "")
	for i := 0; i <= 5; i++ {
		t := maxT * float64(i) / 5
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.0fs</text>`+"\n", xt(t), blBot+16, t)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d">backlog: committed, not yet confirmed</text>`+"\n", padL+12, blTop+14)
	var pts []string
	for _, p := range backlog {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", xt(p.At), yb(float64(p.Backlog))))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#444" stroke-width="1.5" points="%s"/>`+"\n", strings.Join(pts, " "))
	b.WriteString("</svg>\n")
	_, _ = io.WriteString(w, b.String())
}

func axes(b *strings.Builder, top, bot int) {
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n",
		padL, top, padL, bot, padL, bot, plotW-padR, bot)
}

func yTicks(b *strings.Builder, top, bot int, yMax float64, unit string) {
	for i := 0; i <= 4; i++ {
		v := yMax * float64(i) / 4
		py := float64(bot) - float64(i)/4*float64(bot-top)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s%s</text>`+"\n",
			padL, py, plotW-padR, py, padL-6, py+4, trimFloat(v), unit)
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

func escapeXML(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
