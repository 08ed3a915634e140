package diagram

import (
	"fmt"
	"html"
	"strings"
)

// The grid of the drawing, in SVG units: the dashboard's draw.js uses the
// same, so a chapter's picture looks like the live one.
const (
	boxW = 168
	boxH = 54
	gapX = 88
	gapY = 26
	pad  = 16
)

type rect struct{ x, y, w, h float64 }

func boxOf(n Node) rect {
	return rect{x: pad + float64(n.Col)*(boxW+gapX), y: pad + 30 + float64(n.Row)*(boxH+gapY), w: boxW, h: boxH}
}

// path is the arrow of e from box a to box b, as draw.js draws it:
// forward from the right side to the left side, back by one column from
// the left side to the right side, further back along a lane below every
// box, and a loop over a box to itself.
func path(e Edge, a, b rect, bottom float64, lane int) (d string, lx, ly float64) {
	switch {
	case e.From == e.To:
		x := a.x + a.w - 28
		return fmt.Sprintf("M %g %g C %g %g, %g %g, %g %g", x, a.y, x-10, a.y-30, x+40, a.y-30, a.x+a.w, a.y+10), x + 14, a.y - 20
	case !e.Back:
		x1, y1, x2, y2 := a.x+a.w, a.y+a.h/2, b.x, b.y+b.h/2
		dx := max(30, (x2-x1)/2)
		return fmt.Sprintf("M %g %g C %g %g, %g %g, %g %g", x1, y1, x1+dx, y1, x2-dx, y2, x2, y2), (x1 + x2) / 2, (y1+y2)/2 - 5
	case a.x-b.x == boxW+gapX:
		x1, y1, x2, y2 := a.x, a.y+a.h/2+8, b.x+b.w, b.y+b.h/2+8
		return fmt.Sprintf("M %g %g C %g %g, %g %g, %g %g", x1, y1, x1-gapX/2, y1, x2+gapX/2, y2, x2, y2), (x1 + x2) / 2, (y1+y2)/2 - 5
	}
	x1, y1, yl := a.x+a.w/2, a.y+a.h, bottom+14+float64(lane)*9
	xl, y2 := b.x-12-float64(lane)*6, b.y+b.h/2+10
	return fmt.Sprintf("M %g %g L %g %g L %g %g L %g %g L %g %g", x1, y1, x1, yl, xl, yl, xl, y2, b.x, y2), (x1 + xl) / 2, yl - 3
}

// svgStyle colours the drawing as the dashboard does.
const svgStyle = `text{font:12px system-ui,-apple-system,"Segoe UI",sans-serif;fill:#1c2330}
.caption{fill:#6a7383;font-size:11px}
.node rect{fill:#fff;stroke:#d3d8df;stroke-width:1.5}
.exchange rect{fill:#eff1f4}
.wait rect{fill:#fbf3e2;stroke:#efd9a8}
.sink rect{fill:#e6f4ec;stroke:#bfe3cd}
.label{font-weight:600}
.detail{fill:#6a7383;font-size:10.5px}
.edge path{fill:none;stroke:#98a0ad;stroke-width:1.4}
.dead-letter path,.expire path{stroke-dasharray:5 4}
.move path{stroke-width:2.4}
.edge-label{fill:#5b6472;font-size:10px;paint-order:stroke;stroke:#fff;stroke-width:3px}
.head{fill:#98a0ad}`

// SVG draws g as a standalone SVG document, titled title: the boxes and
// arrows of the dashboard's pipeline view, without the live numbers; each
// arrow says what it is (a binding's key, dead-lettering, a consumer's
// republish).
func (g Graph) SVG(title string) string {
	boxes := map[string]rect{}
	var bottom, right float64
	for _, n := range g.Nodes {
		r := boxOf(n)
		boxes[n.ID] = r
		bottom = max(bottom, r.y+r.h)
		right = max(right, r.x+r.w)
	}
	lanes := 0
	for _, e := range g.Edges {
		if far(e, boxes) {
			lanes++
		}
	}
	width, height := right+pad, bottom+30+float64(lanes)*9
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-labelledby="title">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, "<title id=\"title\">%s</title>\n<style>%s</style>\n", html.EscapeString(title), svgStyle)
	b.WriteString(`<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path class="head" d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>` + "\n")
	fmt.Fprintf(&b, "<text class=\"caption\" x=\"%d\" y=\"%d\">%s</text>\n", pad, pad+2, html.EscapeString(title))
	lane := 0
	var labels []string
	said := map[string]bool{} // a label once: work queues share theirs
	for _, e := range g.Edges {
		a, bx := boxes[e.From], boxes[e.To]
		l := 0
		if far(e, boxes) {
			l = lane
			lane++
		}
		d, lx, ly := path(e, a, bx, bottom, l)
		fmt.Fprintf(&b, "<g class=\"edge %s\"><title>%s</title><path d=\"%s\" marker-end=\"url(#head)\"/></g>\n",
			e.Kind, html.EscapeString(e.From+" → "+e.To+labelSuffix(e.Label)), d)
		if e.Kind == EdgeMove && e.Label != "" && !said[e.Label] {
			said[e.Label] = true
			// What the consumer does: the part of the picture a binding
			// cannot say.
			labels = append(labels, fmt.Sprintf("<text class=\"edge-label\" x=\"%g\" y=\"%g\" text-anchor=\"middle\">%s</text>\n", lx, ly, html.EscapeString(e.Label)))
		}
	}
	for _, n := range g.Nodes {
		r := boxes[n.ID]
		rx := 9
		switch n.Kind {
		case KindExchange:
			rx = 3
		case KindSink:
			rx = 27
		}
		detail := n.Detail
		if detail == "" {
			detail = n.Kind
		}
		if len([]rune(detail)) > 28 {
			detail = string([]rune(detail)[:27]) + "…"
		}
		fmt.Fprintf(&b, "<g class=\"node %s\"><title>%s</title><rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" rx=\"%d\"/>"+
			"<text class=\"label\" x=\"%g\" y=\"%g\">%s</text><text class=\"detail\" x=\"%g\" y=\"%g\">%s</text></g>\n",
			n.Kind, html.EscapeString(n.Label+labelSuffix(n.Detail)), r.x, r.y, r.w, r.h, rx,
			r.x+10, r.y+22, html.EscapeString(n.Label), r.x+10, r.y+38, html.EscapeString(detail))
	}
	for _, l := range labels {
		b.WriteString(l)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func labelSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// far reports an arrow drawn along a lane below the boxes.
func far(e Edge, boxes map[string]rect) bool {
	return e.Back && e.From != e.To && boxes[e.From].x-boxes[e.To].x != boxW+gapX
}
