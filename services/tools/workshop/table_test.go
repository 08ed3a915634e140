package workshop

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestTablesShowEveryRowAndWhyOneDidNotRun(t *testing.T) {
	rows := []Figures{
		{Strategy: "ttl-tiers", Accepted: 20, Delivered: 20, ScheduledP50: Duration(250 * time.Millisecond),
			ScheduledP99: Duration(time.Second), ActualP50: none, ActualP99: none, HealthyP50: none, HealthyP99: none,
			HoLP99: Duration(12 * time.Millisecond), PublishesPer: 1.6, Wall: Duration(2 * time.Second), TimedOut: true},
		skippedRow("delayed-exchange", "no plugin; use ttl-tiers"),
		emptyRow(Figures{Strategy: "dlx-requeue", Failed: "declare: INTERNAL_ERROR"}),
	}
	var text, md bytes.Buffer
	if err := writeText(&text, rows, true); err != nil {
		t.Fatal(err)
	}
	if err := writeMarkdown(&md, rows); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"250ms / 1s", "- / -", "12ms", "1.60", "2s (bound)", "delayed-exchange  skipped", "dlx-requeue       failed",
		"delayed-exchange was skipped: no plugin; use ttl-tiers", "dlx-requeue failed: declare: INTERNAL_ERROR",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text table lacks %q:\n%s", want, text.String())
		}
	}
	lines := strings.Split(md.String(), "\n")
	if !strings.HasPrefix(lines[0], "| strategy | accepted |") || !strings.HasPrefix(lines[1], "|---|--:|") {
		t.Errorf("markdown header:\n%s", md.String())
	}
	for i, want := range []string{"| ttl-tiers | 20 | 20 |", "| delayed-exchange | skipped | - |", "| dlx-requeue | failed | - |"} {
		if !strings.HasPrefix(lines[2+i], want) {
			t.Errorf("markdown row %d = %q, want it to start %q", i, lines[2+i], want)
		}
	}
	var r Report
	var js bytes.Buffer
	if err := writeJSON(&js, Report{Rows: rows}); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Rows[0].HoLP99 != rows[0].HoLP99 || r.Rows[0].ActualP50 != none || r.Rows[1].Skipped == "" {
		t.Errorf("JSON round trip lost figures: %+v", r.Rows)
	}
}
