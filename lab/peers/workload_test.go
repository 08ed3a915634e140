package peers

import (
	"testing"
)

func TestFailsIsDeterministic(t *testing.T) {
	w := DefaultWorkload
	for i := range 1000 {
		id := w.ID(i)
		for a := 1; a <= 11; a++ {
			if w.Fails(id, a) != w.Fails(id, a) {
				t.Fatalf("Fails(%q, %d) changed between two calls", id, a)
			}
		}
	}
}

func TestFailsRate(t *testing.T) {
	tests := []struct {
		name     string
		rate     float64
		min, max float64
	}{
		{"never", 0, 0, 0},
		{"always", 1, 1, 1},
		{"the issue's 30 %", 0.30, 0.295, 0.305},
		{"half", 0.5, 0.495, 0.505},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := Workload{FailRate: tt.rate}
			const ids, attempts = 20000, 5
			fails := 0
			for i := range ids {
				for a := 1; a <= attempts; a++ {
					if w.Fails(w.ID(i), a) {
						fails++
					}
				}
			}
			got := float64(fails) / (ids * attempts)
			if got < tt.min || got > tt.max {
				t.Errorf("share of failed attempts = %.4f, want %.3f to %.3f", got, tt.min, tt.max)
			}
		})
	}
}

// TestFailsIndependentOfAttempt checks that the attempt number changes the
// decision: a job that failed once must not fail forever.
func TestFailsIndependentOfAttempt(t *testing.T) {
	w := Workload{FailRate: 0.3}
	both, first := 0, 0
	for i := range 20000 {
		if w.Fails(w.ID(i), 1) {
			first++
			if w.Fails(w.ID(i), 2) {
				both++
			}
		}
	}
	got := float64(both) / float64(first)
	if got < 0.27 || got > 0.33 {
		t.Errorf("P(attempt 2 fails | attempt 1 failed) = %.3f, want about 0.30", got)
	}
}

func TestExpect(t *testing.T) {
	tests := []struct {
		name string
		w    Workload
		want Expect
	}{
		{"nothing fails", Workload{Jobs: 100, FailRate: 0, MaxRetries: 10}, Expect{Delivered: 100, Attempts: 100}},
		{"everything fails", Workload{Jobs: 100, FailRate: 1, MaxRetries: 10}, Expect{Parked: 100, Attempts: 1100, Retries: 1000}},
		{"everything fails, no retries", Workload{Jobs: 7, FailRate: 1, MaxRetries: 0}, Expect{Parked: 7, Attempts: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.w.Expect(); got != tt.want {
				t.Errorf("Expect() = %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Run("the issue's workload", func(t *testing.T) {
		e := DefaultWorkload.Expect()
		// A geometric number of attempts: 0.3/0.7 retries per job.
		want := float64(DefaultWorkload.Jobs) * 0.3 / 0.7
		if got := float64(e.Retries); got < want*0.97 || got > want*1.03 {
			t.Errorf("retries = %d, want about %.0f", e.Retries, want)
		}
		if e.Delivered+e.Parked != DefaultWorkload.Jobs || e.Attempts != DefaultWorkload.Jobs+e.Retries {
			t.Errorf("Expect() = %+v does not add up to %d jobs", e, DefaultWorkload.Jobs)
		}
	})
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		w       func(*Workload)
		wantErr bool
	}{
		{"default", func(*Workload) {}, false},
		{"no jobs", func(w *Workload) { w.Jobs = 0 }, true},
		{"no handlers", func(w *Workload) { w.Concurrency = 0 }, true},
		{"rate above 1", func(w *Workload) { w.FailRate = 1.5 }, true},
		{"no delay", func(w *Workload) { w.Delay = 0 }, true},
		{"negative retries", func(w *Workload) { w.MaxRetries = -1 }, true},
		{"no retries", func(w *Workload) { w.MaxRetries = 0 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := DefaultWorkload
			tt.w(&w)
			if err := w.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate() = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestIDsAreUnique(t *testing.T) {
	w := Workload{Jobs: 20000}
	seen := map[string]bool{}
	for _, id := range w.IDs() {
		if seen[id] {
			t.Fatalf("id %q twice", id)
		}
		seen[id] = true
	}
	if len(seen) != w.Jobs {
		t.Errorf("%d ids, want %d", len(seen), w.Jobs)
	}
}
