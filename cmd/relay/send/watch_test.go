package send

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/apiclient"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// TestCopyWatchNext feeds one copy's timelines, poll after poll, to a
// copyWatch and checks which attempts it prints at each.
func TestCopyWatchNext(t *testing.T) {
	const grace = 3 * time.Second
	a1 := failed(1, 1000, busy, 1000)
	a2 := failed(2, 2000, busy, 2000)
	a3 := notification.Attempt{N: 3, At: at(4000), Outcome: "delivered"}
	parked := notification.Attempt{N: 1, At: at(1000), Outcome: "parked", Reason: "permanent"}
	replay := notification.Attempt{N: 0, Round: 1, At: at(5000), Outcome: "replayed"}
	r1 := notification.Attempt{N: 1, Round: 1, At: at(6000), Outcome: "delivered"}
	type poll struct {
		now  int // ms after t0
		copy notification.Copy
		want []string // labels printed
	}
	tests := []struct {
		name     string
		polls    []poll
		wantDone retry.Outcome
	}{
		{
			name: "in order, each once",
			polls: []poll{
				{1000, cp("email", "retrying", 1000, a1), nil},
				{1100, cp("email", "retrying", 1002, a1), []string{"attempt 1"}},
				{1200, cp("email", "retrying", 1002, a1), nil},
				{4100, cp("email", "delivered", 4000, a1, a2, a3), []string{"attempt 2", "attempt 3"}},
			},
			wantDone: "delivered",
		},
		{
			name: "a missing attempt is waited for, then given up on after the grace period",
			polls: []poll{
				{2000, cp("email", "retrying", 2002, a2), nil},
				{4999, cp("email", "retrying", 2002, a2), nil},
				{5000, cp("email", "retrying", 2002, a2), []string{"attempt 2"}},
				// Too late: printing it now would put it after attempt 2.
				{5100, cp("email", "delivered", 4000, a1, a2, a3), []string{"attempt 3"}},
			},
			wantDone: "delivered",
		},
		{
			name: "a replayed round follows the parked one",
			polls: []poll{
				{6100, cp("email", "delivered", 6000, parked, replay, r1), []string{"attempt 1", "round 1", "attempt 1, round 1"}},
			},
			wantDone: "delivered",
		},
		{
			name: "parked, unless replayed since",
			polls: []poll{
				{1100, cp("email", "parked", 1000, parked), []string{"attempt 1"}},
			},
			wantDone: "parked",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cw := &copyWatch{channel: "email"}
			for i, p := range tt.polls {
				var got []string
				for _, a := range cw.next(p.copy, at(p.now), grace) {
					got = append(got, apiclient.Label(a))
				}
				if diff := cmp.Diff(p.want, got); diff != "" {
					t.Errorf("poll %d (-want +got):\n%s", i, diff)
				}
			}
			if cw.done != tt.wantDone {
				t.Errorf("done = %q, want %q", cw.done, tt.wantDone)
			}
		})
	}
}

// TestDueAfter checks that a notification whose copies all wait for a
// retry is not asked about again before the first is due.
func TestDueAfter(t *testing.T) {
	now := at(1500)
	due := func(ms int) *time.Time { d := at(ms); return &d }
	a1 := failed(1, 1000, busy, 1000)
	retrying := func(channel string, next *time.Time) notification.Copy {
		c := cp(channel, "retrying", 1002, a1)
		c.NextAttemptAt = next
		return c
	}
	tests := []struct {
		name    string
		copies  []notification.Copy
		printed bool // attempt 1 of each copy printed
		want    time.Time
	}{
		{"both wait: the first one due", []notification.Copy{retrying("email", due(5000)), retrying("webhook", due(3000))}, true, at(3000)},
		{"one is due already", []notification.Copy{retrying("email", due(5000)), retrying("webhook", due(1400))}, true, now},
		{"a failure not printed yet", []notification.Copy{retrying("email", due(5000)), retrying("webhook", due(3000))}, false, now},
		{"one is queued", []notification.Copy{retrying("email", due(5000)), cp("webhook", "queued", 0)}, true, now},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &tracked{id: "ntf_1", left: 2}
			for _, ch := range []string{"email", "webhook"} {
				tr.copies = append(tr.copies, &copyWatch{channel: ch, last: a1, started: tt.printed})
			}
			w := &watcher{}
			got := w.dueAfter(tr, &notification.View{ID: "ntf_1", Copies: tt.copies}, now)
			if !got.Equal(tt.want) {
				t.Errorf("dueAfter = %s, want %s", got.Format("15:04:05.000"), tt.want.Format("15:04:05.000"))
			}
		})
	}
}

// TestLineWidths: an attempt's line at the widths of real terminals. An
// error gets the room the line leaves it, and a line of its own where that
// is too little to read; a head wider than the terminal names the
// notification by the start of its id.
func TestLineWidths(t *testing.T) {
	const id = "ntf_hsh5l36jqlmm5huzoim3ipfbtq"
	at := time.Date(2026, 5, 3, 13, 50, 1, 305e6, time.UTC)
	delay := int64(1000)
	failure := notification.Attempt{N: 1, At: at, Outcome: "failed", DelayMS: &delay,
		Error: "send email " + id + ": closing SMTP DATA writer: 451 4.3.0 mailbox busy"}
	parked := notification.Attempt{N: 5, At: at, Outcome: "parked", Reason: "max-retries",
		Error: "webhook http://127.0.0.1:9090/webhooks/down: 503 Service Unavailable"}
	tests := []struct {
		name  string
		width int
		copy  string
		a     notification.Attempt
		want  string
	}{
		{"wide: all of it", 200, "email demo@example.com", failure,
			"13:50:01.305  ntf_hsh5l36jqlmm5huzoim3ipfbtq email demo@example.com attempt 1  failed  send email ntf_hsh5l36jqlmm5huzoim3ipfbtq: closing SMTP DATA writer: 451 4.3.0 mailbox busy  next in 1s"},
		{"120 columns: the error cut", 120, "webhook", parked,
			"13:50:01.305  ntf_hsh5l36jqlmm5huzoim3ipfbtq webhook attempt 5  parked  reason max-retries  webhook http://127.0.0.1:90…"},
		{"100 columns: the error below, not cut to a word", 100, "webhook", parked,
			"13:50:01.305  ntf_hsh5l36jqlmm5huzoim3ipfbtq webhook attempt 5  parked  reason max-retries\n" +
				"    webhook http://127.0.0.1:9090/webhooks/down: 503 Service Unavailable"},
		{"80 columns: the start of the id, the error below", 80, "email demo@example.com", failure,
			"13:50:01.305  ntf_…m3ipfbtq email demo@example.com attempt 1  failed  next in 1s\n" +
				"    send email ntf_hsh5l36jqlmm5huzoim3ipfbtq: closing SMTP DATA writer: 451…"},
		{"60 columns: the wait below too", 60, "email demo@example.com", failure,
			"13:50:01.305  ntf_…m3ipfbtq email demo@example.com attempt 1  failed\n" +
				"    next in 1s  send email ntf_hsh5l36jqlmm5huzoim3ipfbtq…"},
	}
	// Two ids of one burst, made a moment apart, share their start: cut
	// short, they must still differ.
	a, b := shortID("ntf_2al4bwfq66mkndmlsfiwbmj24o"), shortID("ntf_2al4bwfq6nxb7ikpnegf3azmp6")
	if a == b || a != "ntf_…iwbmj24o" {
		t.Errorf("shortID: %q and %q", a, b)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &watcher{width: tt.width, loc: time.UTC}
			if diff := cmp.Diff(tt.want, w.line(id, tt.copy, tt.a)); diff != "" {
				t.Errorf("line (-want +got):\n%s", diff)
			}
		})
	}
}
