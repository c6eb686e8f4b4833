package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
)

// Chart colours.
var (
	white     = color.RGBA{255, 255, 255, 255}
	black     = color.RGBA{20, 20, 20, 255}
	grey      = color.RGBA{110, 110, 110, 255}
	gridGrey  = color.RGBA{225, 225, 225, 255}
	sqliteBar = color.RGBA{52, 101, 164, 255}
	pgBar     = color.RGBA{230, 145, 56, 255}
	boundRed  = color.RGBA{204, 0, 0, 255}
)

// barGroup is the bars of one backend and its disk bound.
type barGroup struct {
	title string
	bars  []*procResult
	bound float64 // raw commits/s over the commits of a cycle; 0 when unknown
	fill  color.Color
}

// writePlot draws the processes' throughput as bars, one group per
// backend, with each backend's physical bound as a dashed line and 80% of
// it as a dotted one, and writes the PNG to path.
func writePlot(path string, r *report) error {
	groups := plotGroups(r)
	if len(groups) == 0 {
		return fmt.Errorf("--plot: no process measurements to draw (drop --skip-procs)")
	}
	const width, height = 1000, 620
	const left, right, top, bottom = 120, 40, 130, 120
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	fillRect(img, 0, 0, width, height, white)

	drawText(img, left, 20, "Full ledger cycles per second by process count", 3, black, false)
	m := r.Machine
	drawText(img, left, 56, "preview + apply + undo of an ordinary operation", 2, grey, false)
	drawText(img, left, 80, fmt.Sprintf("%s, %d cores, %s, %s", m.CPU, m.Cores, m.Kernel, m.FSType), 2, grey, false)

	ymax := 0.0
	for _, g := range groups {
		ymax = math.Max(ymax, g.bound)
		for _, b := range g.bars {
			ymax = math.Max(ymax, b.CyclesPerSec)
		}
	}
	step := niceStep(ymax / 5)
	ymax = math.Ceil(ymax*1.1/step) * step
	x0, x1, y0, y1 := left, width-right, height-bottom, top
	yOf := func(v float64) int { return y0 - int(math.Round(v/ymax*float64(y0-y1))) }

	for v := 0.0; v <= ymax+step/2; v += step {
		y := yOf(v)
		fillRect(img, x0, y, x1, y+1, gridGrey)
		label := fmt.Sprintf("%g", v)
		drawText(img, x0-10-textWidth(label, 2), y-7, label, 2, black, false)
	}
	drawText(img, 24, (y0+y1)/2+textWidth("cycles/s", 2)/2, "cycles/s", 2, black, true)

	// Slots: every bar is one slot, with one empty slot between groups.
	slots := -1
	for _, g := range groups {
		slots += len(g.bars) + 1
	}
	slotW := float64(x1-x0) / float64(slots)
	slot := 0
	for _, g := range groups {
		gx0 := x0 + int(float64(slot)*slotW)
		for _, b := range g.bars {
			cx := x0 + int((float64(slot)+0.5)*slotW)
			bw := int(slotW * 0.6)
			fillRect(img, cx-bw/2, yOf(b.CyclesPerSec), cx+bw/2, y0, g.fill)
			val := fmt.Sprintf("%.0f", b.CyclesPerSec)
			drawText(img, cx-textWidth(val, 2)/2, yOf(b.CyclesPerSec)-20, val, 2, black, false)
			lbl := fmt.Sprint(b.Procs)
			drawText(img, cx-textWidth(lbl, 2)/2, y0+10, lbl, 2, black, false)
			slot++
		}
		gx1 := x0 + int(float64(slot)*slotW)
		drawText(img, (gx0+gx1)/2-textWidth(g.title, 2)/2, y0+36, g.title, 2, black, false)
		if g.bound > 0 {
			dashed(img, gx0, gx1, yOf(g.bound), 12, 6, boundRed)
			dashed(img, gx0, gx1, yOf(0.8*g.bound), 3, 5, boundRed)
		}
		slot++
	}
	fillRect(img, x0, y1, x0+2, y0+1, black) // the axes
	fillRect(img, x0, y0, x1, y0+2, black)

	if groups[0].bound == 0 && (len(groups) == 1 || groups[1].bound == 0) {
		return writePNG(path, img)
	}
	// Legend.
	lx, ly := left, height-54
	dashed(img, lx, lx+40, ly+7, 12, 6, boundRed)
	drawText(img, lx+50, ly, "bound: one client's baseline commits/s / commits per cycle", 2, black, false)
	dashed(img, lx, lx+40, ly+31, 3, 5, boundRed)
	drawText(img, lx+50, ly+24, "80% of the bound (the goal)", 2, black, false)

	return writePNG(path, img)
}

func writePNG(path string, img image.Image) error {
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

// plotGroups collects the bars to draw from r.
func plotGroups(r *report) []barGroup {
	perCycle := r.commitsPerCycle()
	sq := barGroup{title: "SQLite: processes", fill: sqliteBar}
	pg := barGroup{title: "PostgreSQL: clients", fill: pgBar}
	if raw := r.procRaw("sqlite"); raw != nil {
		sq.bound = raw.PerSecond() / perCycle
	}
	if raw := r.procRaw("postgres"); raw != nil {
		pg.bound = raw.PerSecond() / perCycle
	}
	for _, p := range r.Procs {
		if p.Backend == "postgres" {
			pg.bars = append(pg.bars, p)
		} else {
			sq.bars = append(sq.bars, p)
		}
	}
	var out []barGroup
	for _, g := range []barGroup{sq, pg} {
		if len(g.bars) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// dashed draws a horizontal dashed line 2 pixels thick from x0 to x1.
func dashed(img *image.RGBA, x0, x1, y, on, off int, c color.Color) {
	for x := x0; x < x1; x += on + off {
		fillRect(img, x, y-1, min(x+on, x1), y+1, c)
	}
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
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

// commitsPerCycle is what a cycle of the ordinary operation commits: as
// counted in this run, or the 5 that docs/benchmarks.md explains.
func (r *report) commitsPerCycle() float64 {
	if disk := r.medium("disk"); disk != nil {
		for _, c := range disk.Cycles {
			if c.Op == "ordinary" && c.Steps.Total() > 0 {
				return c.Steps.Total()
			}
		}
	}
	return 5
}
