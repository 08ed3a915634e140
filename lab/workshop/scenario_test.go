package workshop

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSickSetIsExactAndSeeded(t *testing.T) {
	sc, err := FindScenario("sick-tenth")
	if err != nil {
		t.Fatal(err)
	}
	names := ids(200)
	a, b, other := sc.sickSet(names, 1), sc.sickSet(names, 1), sc.sickSet(names, 2)
	if len(a) != 20 {
		t.Errorf("%d sick of 200, want exactly 20", len(a))
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different notifications (-first +second):\n%s", diff)
	}
	if cmp.Equal(a, other) {
		t.Error("seeds 1 and 2 chose the same notifications")
	}
	if got := sc.healthy().sickSet(names, 1); len(got) != 0 {
		t.Errorf("the healthy variant has %d sick notifications", len(got))
	}
}

func TestJudge(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sick := func(name string) judge {
		sc, err := FindScenario(name)
		if err != nil {
			t.Fatal(err)
		}
		sc.Sick = 1 // every notification is sick, to test the window
		return newJudge(sc, []string{"n-1"}, 1, start)
	}
	tests := []struct {
		name     string
		j        judge
		attempt  int
		first    time.Duration // after start
		now      time.Duration
		wantOK   bool
		wantNote string
	}{
		{"sick inside its window", sick("sick-tenth"), 3, 0, 899 * time.Millisecond, false, "503: sick until 900ms after its first attempt"},
		{"recovered after its window", sick("sick-tenth"), 4, 0, 900 * time.Millisecond, true, ""},
		{"the window starts at the first attempt", sick("sick-tenth"), 2, time.Second, 1500 * time.Millisecond, false, "503: sick until 900ms after its first attempt"},
		{"poison never recovers", sick("poison"), 1000, 0, time.Hour, false, "503: this notification always fails"},
		{"outage refuses early attempts", newJudge(mustScenario(t, "outage"), nil, 1, start), 1, 0, time.Second, false, "503: simulated outage until 2026-01-01T00:00:01Z"},
		{"outage over", newJudge(mustScenario(t, "outage"), nil, 1, start), 1, 0, 1500 * time.Millisecond, true, ""},
		{"healthy accepts", newJudge(mustScenario(t, "healthy"), nil, 1, start), 1, 0, 0, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.j.decide("n-1", tt.attempt, start.Add(tt.first), start.Add(tt.now))
			if v.ok != tt.wantOK || v.note != tt.wantNote {
				t.Errorf("decide = %+v, want ok=%v note=%q", v, tt.wantOK, tt.wantNote)
			}
		})
	}
}

func TestFlakyIsSeededPerAttempt(t *testing.T) {
	j := newJudge(mustScenario(t, "flaky"), nil, 7, time.Now())
	failed := 0
	for i := range 1000 {
		id := ids(1000)[i]
		a := j.decide(id, 1, time.Now(), time.Now())
		if b := j.decide(id, 1, time.Now(), time.Now()); a != b {
			t.Fatalf("%s: attempt 1 decided %v, then %v", id, a, b)
		}
		if !a.ok {
			failed++
		}
	}
	if failed < 250 || failed > 350 {
		t.Errorf("%d of 1000 first attempts failed, want about 300", failed)
	}
}

func mustScenario(t *testing.T, name string) Scenario {
	t.Helper()
	sc, err := FindScenario(name)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestUnknownScenario(t *testing.T) {
	if _, err := FindScenario("gentle"); err == nil {
		t.Error("unknown scenario accepted")
	}
}

func TestIDsSortAsText(t *testing.T) {
	if diff := cmp.Diff([]string{"n-01", "n-02", "n-10"}, []string{ids(10)[0], ids(10)[1], ids(10)[9]}); diff != "" {
		t.Error(diff)
	}
}
