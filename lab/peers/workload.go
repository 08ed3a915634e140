package peers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"time"
)

// Workload is the retry workload every system runs: Jobs jobs handled by
// Concurrency handlers at once, each attempt failing transiently with
// probability FailRate, a fixed Delay before each retry, and at most
// MaxRetries retries before the system parks the job its own way.
type Workload struct {
	Jobs        int           `json:"jobs"`
	Concurrency int           `json:"concurrency"`
	FailRate    float64       `json:"fail_rate"`
	Delay       time.Duration `json:"delay_ns"`
	MaxRetries  int           `json:"max_retries"`
}

// DefaultWorkload is the workload of issue #16.
var DefaultWorkload = Workload{Jobs: 20000, Concurrency: 8, FailRate: 0.30, Delay: 100 * time.Millisecond, MaxRetries: 10}

// Validate says what is wrong with w, if anything.
func (w Workload) Validate() error {
	switch {
	case w.Jobs < 1:
		return fmt.Errorf("jobs %d: want at least 1", w.Jobs)
	case w.Concurrency < 1:
		return fmt.Errorf("concurrency %d: want at least 1", w.Concurrency)
	case w.FailRate < 0 || w.FailRate > 1:
		return fmt.Errorf("fail rate %v: want 0 to 1", w.FailRate)
	case w.Delay <= 0:
		return fmt.Errorf("delay %v: want more than 0", w.Delay)
	case w.MaxRetries < 0:
		return fmt.Errorf("max retries %d: want 0 or more", w.MaxRetries)
	}
	return nil
}

// ID is the id of job i: the AMQP message-id, asynq's task id, River's
// argument, watermill's UUID.
func (w Workload) ID(i int) string { return fmt.Sprintf("job-%06d", i) }

// IDs lists every job's id.
func (w Workload) IDs() []string {
	ids := make([]string, w.Jobs)
	for i := range ids {
		ids[i] = w.ID(i)
	}
	return ids
}

// Fails decides whether attempt (1 for the first) of the job id fails. It
// is a pure function of its arguments, so every system sees the same
// failures: a 64-bit FNV-1a hash of the id and the attempt, spread by
// SplitMix64's finaliser, read as a fraction of 1 and compared with the
// fail rate.
func (w Workload) Fails(id string, attempt int) bool {
	h := fnv.New64a()
	h.Write([]byte(id))
	var n [9]byte // a 0 byte keeps "job-1"+"12" apart from "job-11"+"2"
	binary.LittleEndian.PutUint64(n[1:], uint64(attempt))
	h.Write(n[:])
	return unit(mix(h.Sum64())) < w.FailRate
}

// mix is SplitMix64's finaliser: FNV's low bits alone are poorly spread
// for inputs that differ in one byte.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// unit maps x to [0, 1) with 53 bits of precision.
func unit(x uint64) float64 { return float64(x>>11) / (1 << 53) }

// Expect is what the workload must come to on a system that loses nothing
// and delivers nothing twice: the jobs delivered and parked, and the
// attempts and retries that takes.
type Expect struct {
	Delivered, Parked, Attempts, Retries int
}

// Expect works out, from Fails alone, what the workload comes to.
func (w Workload) Expect() Expect {
	var e Expect
	for i := range w.Jobs {
		id := w.ID(i)
		for a := 1; ; a++ {
			e.Attempts++
			if !w.Fails(id, a) {
				e.Delivered++
				break
			}
			if a > w.MaxRetries {
				e.Parked++
				break
			}
			e.Retries++
		}
	}
	return e
}

// ErrTransient is the failure every handler returns for an attempt that
// Fails: a plain error, retried by every system.
var ErrTransient = errors.New("transient failure (decided by the workload)")
