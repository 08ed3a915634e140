package bench

import (
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"time"
)

// Cost is what one measured run cost, per message: this process's CPU
// time and heap allocations, the broker's CPU time, and this process's
// peak resident set while it ran. Both sides of a figure run in this
// process, so the raw side's cost is amqp091-go's own and the difference
// is relay's.
type Cost struct {
	CPUPerMsg    time.Duration `json:"cpu_per_msg_ns"`
	AllocsPerMsg float64       `json:"allocs_per_msg"`
	BytesPerMsg  float64       `json:"bytes_per_msg"`
	PeakRSS      uint64        `json:"peak_rss_bytes"`
	// BrokerCPUPerMsg is zero when the broker's process is not visible.
	BrokerCPUPerMsg time.Duration `json:"broker_cpu_per_msg_ns"`
}

// meter measures the Cost of the run between start and stop.
type meter struct {
	broker    []int // the broker's processes
	brokerCPU time.Duration
	brokerOK  bool
	cpu       time.Duration
	mem       runtime.MemStats
	hwm       bool // VmHWM was reset at start and can be read at stop
	stopOnce  sync.Once
	done      chan struct{}
	sampled   chan uint64
}

// rssSampleEvery is how often RSS is sampled where VmHWM cannot be reset.
const rssSampleEvery = 20 * time.Millisecond

// startMeter collects the garbage of earlier runs and hands their memory
// back to the system, so each run's peak RSS is its own, then starts
// counting.
func startMeter(broker []int) *meter {
	runtime.GC()
	debug.FreeOSMemory()
	m := &meter{broker: broker, done: make(chan struct{}), sampled: make(chan uint64, 1)}
	m.hwm = resetPeakRSS()
	go m.sample()
	runtime.ReadMemStats(&m.mem)
	m.cpu = cpuTime()
	m.brokerCPU, m.brokerOK = processCPU(broker)
	return m
}

// sample tracks the highest RSS seen until stop.
func (m *meter) sample() {
	var peak uint64
	t := time.NewTicker(rssSampleEvery)
	defer t.Stop()
	for {
		if rss, err := statusKB("VmRSS"); err == nil {
			peak = max(peak, rss)
		}
		select {
		case <-m.done:
			m.sampled <- peak
			return
		case <-t.C:
		}
	}
}

// stop ends the measurement of a run that handled n messages.
func (m *meter) stop(n int) Cost {
	cpu := cpuTime() - m.cpu
	brokerCPU, brokerOK := processCPU(m.broker)
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	m.stopOnce.Do(func() { close(m.done) })
	peak := <-m.sampled
	if m.hwm {
		if hwm, err := statusKB("VmHWM"); err == nil {
			peak = max(peak, hwm)
		}
	}
	n = max(n, 1)
	c := Cost{
		CPUPerMsg:    cpu / time.Duration(n),
		AllocsPerMsg: float64(mem.Mallocs-m.mem.Mallocs) / float64(n),
		BytesPerMsg:  float64(mem.TotalAlloc-m.mem.TotalAlloc) / float64(n),
		PeakRSS:      peak,
	}
	if m.brokerOK && brokerOK {
		c.BrokerCPUPerMsg = (brokerCPU - m.brokerCPU) / time.Duration(n)
	}
	return c
}

// abort stops the sampling of a run that failed; stop must not follow.
func (m *meter) abort() { m.stopOnce.Do(func() { close(m.done) }) }

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
