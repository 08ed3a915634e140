package workshop

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// tableRows are one row of each kind: measured (and stopped by its bound),
// skipped and failed.
func tableRows() []Figures {
	rows := []Figures{
		{Strategy: "ttl-tiers", Accepted: 20, Delivered: 20, ScheduledP50: Duration(250 * time.Millisecond),
			ScheduledP99: Duration(time.Second), ActualP50: none, ActualP99: none, HealthyP50: none, HealthyP99: none,
			HoLP99: Duration(12 * time.Millisecond), PublishesPer: 1.6, Wall: Duration(2 * time.Second), TimedOut: true},
		skippedRow("delayed-exchange", "the broker cannot run this strategy: no delayed-message plugin (no x-delayed-message "+
			"exchange type); use ttl-tiers"),
		emptyRow(Figures{Strategy: "dlx-requeue", Failed: "declare: INTERNAL_ERROR"}),
	}
	verdicts(rows)
	return rows
}

func TestTablesShowEveryRowAndWhyOneDidNotRun(t *testing.T) {
	rows := tableRows()
	var narrow, wide, md bytes.Buffer
	if err := writeText(&narrow, rows, true, false); err != nil {
		t.Fatal(err)
	}
	if err := writeText(&wide, rows, true, true); err != nil {
		t.Fatal(err)
	}
	if err := writeMarkdown(&md, rows, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"1s / -", "12ms", "1.60", "2s*", "delayed-exchange  skipped", "dlx-requeue       failed",
		"delayed-exchange  not runnable: no delayed-message plugin",
		"delayed-exchange did not run: the broker cannot run this strategy: no delayed-message plugin",
		"dlx-requeue failed: declare: INTERNAL_ERROR",
	} {
		if !strings.Contains(narrow.String(), want) {
			t.Errorf("text table lacks %q:\n%s", want, narrow.String())
		}
	}
	wideHeader, narrowHeader := strings.SplitN(wide.String(), "\n", 2)[0], strings.SplitN(narrow.String(), "\n", 2)[0]
	for _, want := range []string{"accepted", "delay sched p50 / p99", "delay actual p50 / p99", "healthy p50 / p99"} {
		if !strings.Contains(wideHeader, want) {
			t.Errorf("--wide table lacks %q:\n%s", want, wide.String())
		}
		if strings.Contains(narrowHeader, want) {
			t.Errorf("default table has %q, a --wide column:\n%s", want, narrow.String())
		}
	}
	if !strings.Contains(wide.String(), "250ms / 1s") || !strings.Contains(wide.String(), "2s*") {
		t.Errorf("--wide table:\n%s", wide.String())
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
	if !strings.Contains(md.String(), "- `delayed-exchange`: not runnable: no delayed-message plugin\n") {
		t.Errorf("markdown lacks the verdicts:\n%s", md.String())
	}
	var r Report
	var js bytes.Buffer
	if err := writeJSON(&js, Report{Rows: rows}); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Rows[0].HoLP99 != rows[0].HoLP99 || r.Rows[0].ActualP50 != none || r.Rows[1].Skipped == "" || r.Rows[0].Verdict == "" {
		t.Errorf("JSON round trip lost figures: %+v", r.Rows)
	}
}

// TestDefaultTableFitsIn120Columns fills every column of the default table
// with its widest value, under the longest strategy name.
func TestDefaultTableFitsIn120Columns(t *testing.T) {
	long := Duration(12340 * time.Millisecond)
	worst := Figures{
		// Lost and duplicates in the thousands would be news in themselves.
		Strategy: "quorum-delivery-limit", Accepted: 100000, Delivered: 100000, Parked: 100000, InFlight: 100000, Lost: 999,
		Duplicates: 999, Attempts: 9999999, ScheduledP50: long, ScheduledP99: Duration(1250 * time.Millisecond),
		ActualP50: long, ActualP99: long, HealthyP50: long, HealthyP99: long, HoLP99: long, PublishesPer: 10.25,
		Wall: Duration(15010 * time.Millisecond), TimedOut: true,
	}
	native := skippedRow("native-delayed-retry", "not runnable on RabbitMQ 3.10.8: needs 4.3 with quorum queues")
	rows := []Figures{worst, native, {Strategy: "delay-levels/direct", Accepted: 200, Delivered: 200, ScheduledP99: Duration(time.Second),
		ActualP99: Duration(time.Second), PublishesPer: 1.3}}
	verdicts(rows)
	var out bytes.Buffer
	if err := writeText(&out, rows, true, false); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if n := len([]rune(line)); n > Width {
			t.Errorf("%d columns: %q", n, line)
		}
	}
	if !strings.Contains(out.String(), "native-delayed-retry   not runnable on RabbitMQ 3.10.8: needs 4.3 with quorum queues\n") {
		t.Errorf("the native row's verdict is not the reason:\n%s", out.String())
	}
	if strings.Contains(out.String(), "native-delayed-retry did not run") {
		t.Errorf("the native row's reason is repeated under the table:\n%s", out.String())
	}
}

func TestVerdicts(t *testing.T) {
	ok := Figures{Strategy: "ttl-tiers", Accepted: 200, Delivered: 200, Attempts: 260, ScheduledP99: Duration(750 * time.Millisecond),
		ActualP99: Duration(753 * time.Millisecond), HoLP99: Duration(11 * time.Millisecond), PublishesPer: 1.6}
	quick := Figures{Strategy: "dlx-requeue", Accepted: 200, Delivered: 180, Parked: 20, Attempts: 300, ScheduledP99: 0,
		ActualP99: Duration(3 * time.Millisecond), HoLP99: Duration(4 * time.Millisecond), PublishesPer: 1.6}
	loop := Figures{Strategy: "naive-requeue", Accepted: 200, Delivered: 190, InFlight: 10, Attempts: 4200, ScheduledP99: 0,
		HoLP99: Duration(600 * time.Millisecond), PublishesPer: 1, TimedOut: true}
	blocked := ok
	blocked.Strategy, blocked.HoLP99 = "per-message-ttl", Duration(480*time.Millisecond)
	// Late hops, not blocking: the verdict shows the delay it took.
	slow := ok
	slow.Strategy, slow.ActualP99, slow.HoLP99 = "delay-levels", Duration(936*time.Millisecond), Duration(130*time.Millisecond)
	lossy := ok
	lossy.Strategy, lossy.Delivered, lossy.Lost, lossy.Duplicates = "lossy", 197, 3, 2
	native := skippedRow("native-delayed-retry", "not runnable on RabbitMQ 3.10.8: needs 4.3 with quorum queues")
	rows := []Figures{ok, quick, loop, blocked, slow, lossy, native}
	want := map[string]string{
		"ttl-tiers":            "good: 200 delivered; p99 delay 750ms asked, 753ms taken; 1.60 pub/notif",
		"dlx-requeue":          "poor: parked 20 that others delivered; retries without a pause",
		"naive-requeue":        "poor: 10 never settled; 21.0 attempts per notification; retries without a pause",
		"per-message-ttl":      "poor: waits behind others (HoL p99 480ms)",
		"delay-levels":         "good: 200 delivered; p99 delay 750ms asked, 936ms taken; 1.60 pub/notif",
		"lossy":                "poor: lost 3; 2 duplicate deliveries",
		"native-delayed-retry": "not runnable on RabbitMQ 3.10.8: needs 4.3 with quorum queues",
	}
	verdicts(rows)
	for _, f := range rows {
		if f.Verdict != want[f.Strategy] {
			t.Errorf("%s: verdict %q, want %q", f.Strategy, f.Verdict, want[f.Strategy])
		}
		if n := len([]rune(f.Verdict)); n > verdictWidth {
			t.Errorf("%s: verdict of %d characters, more than %d", f.Strategy, n, verdictWidth)
		}
	}
}
