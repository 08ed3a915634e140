package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Machine describes where the figures were measured.
type Machine struct {
	CPU   string `json:"cpu"`
	Cores int    `json:"cores"`
	Go    string `json:"go"`
	OS    string `json:"os"`
}

// ThisMachine reads the CPU model from /proc/cpuinfo and the rest from
// the runtime.
func ThisMachine() Machine {
	m := Machine{CPU: "unknown", Cores: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if model := cpuModel(b); model != "" {
			m.CPU = model
		}
	}
	return m
}

// loadAverage is the machine's one-minute load average (/proc/loadavg);
// 0 where it cannot be read.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscan(string(b), &l)
	return l
}

// cpuModel finds the first "model name" line of a /proc/cpuinfo.
func cpuModel(cpuinfo []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// brokerVersion names the broker from the server properties it sent when
// the connection opened, such as "RabbitMQ 3.10.8".
func brokerVersion(conn *amqp.Connection) string {
	product, _ := conn.Properties["product"].(string)
	version, _ := conn.Properties["version"].(string)
	if product == "" {
		product = "AMQP broker"
	}
	if version == "" {
		return product + " (version not announced)"
	}
	return product + " " + version
}

// statusKB reads one "kB" field of /proc/self/status, such as VmRSS or
// VmHWM, in bytes.
func statusKB(field string) (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read process status: %w", err)
	}
	return parseStatusKB(b, field)
}

func parseStatusKB(status []byte, field string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		num, _, _ := strings.Cut(strings.TrimSpace(v), " ")
		kb, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("process status %s %q: %w", field, v, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("process status has no %s", field)
}

// resetPeakRSS makes VmHWM start again from the current RSS (Linux 4.0 and
// later); it reports whether the kernel took it.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// userHZ is the unit of the CPU times in /proc/<pid>/stat: fixed at 100 by
// the kernel's user-space ABI on every architecture Go runs Linux on.
const userHZ = 100

// brokerPIDs finds the broker's processes on this machine: the beam.smp
// (RabbitMQ's Erlang VM) that listens on port, the AMQP URL's, so that on a
// machine with several brokers the figures count the one measured. When
// no beam.smp is seen to listen there (its sockets unreadable), every
// beam.smp counts, and only is false. A broker this process cannot see
// (another PID namespace) yields none, and its CPU goes unreported.
func brokerPIDs(port int) (pids []int, only bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err == nil && strings.TrimSpace(string(comm)) == "beam.smp" {
			pids = append(pids, pid)
		}
	}
	inodes := listeningInodes(port)
	var listening []int
	for _, pid := range pids {
		if holdsSocket(pid, inodes) {
			listening = append(listening, pid)
		}
	}
	if len(listening) > 0 {
		return listening, true
	}
	return pids, false
}

// listeningInodes are the socket inodes listening on port, from
// /proc/net/tcp and tcp6.
func listeningInodes(port int) map[string]bool {
	out := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for k, v := range parseListeners(string(b), port) {
			out[k] = v
		}
	}
	return out
}

// parseListeners reads a /proc/net/tcp table: the inodes of the sockets
// in state LISTEN (0A) whose local port is port.
func parseListeners(table string, port int) map[string]bool {
	out := map[string]bool{}
	for i, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 10 || f[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 16); !ok || err != nil || int(p) != port {
			continue
		}
		out[f[9]] = true
	}
	return out
}

// holdsSocket reports whether pid has one of the socket inodes open.
func holdsSocket(pid int, inodes map[string]bool) bool {
	if len(inodes) == 0 {
		return false
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		link, err := os.Readlink(dir + "/" + fd.Name())
		if err == nil && strings.HasPrefix(link, "socket:[") && inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
			return true
		}
	}
	return false
}

// processCPU sums the CPU time of pids; ok is false when one of them
// cannot be read. It reads each thread's run time in nanoseconds
// (/proc/<pid>/task/*/schedstat), where the kernel keeps it: the
// utime+stime of /proc/<pid>/stat counts in ticks of 10 ms, too coarse
// for a short run, which may see no tick at all. Without schedstat it
// falls back to the ticks.
func processCPU(pids []int) (total time.Duration, ok bool) {
	for _, pid := range pids {
		if d, err := schedCPU(pid); err == nil {
			total += d
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0, false
		}
		ticks, err := statCPUTicks(b)
		if err != nil {
			return 0, false
		}
		total += time.Duration(ticks) * time.Second / userHZ
	}
	return total, len(pids) > 0
}

// schedCPU sums the run time of every thread of pid, from the first field
// of each /proc/<pid>/task/<tid>/schedstat (nanoseconds on the CPU).
func schedCPU(pid int) (time.Duration, error) {
	files, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("no schedstat for process %d", pid)
	}
	var total time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended meanwhile
		}
		first, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		ns, err := strconv.ParseUint(first, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", f, b, err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// statCPUTicks reads utime + stime from a /proc/<pid>/stat line. The
// command name, in parentheses, may hold spaces: fields are counted from
// the last ')'.
func statCPUTicks(stat []byte) (uint64, error) {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("process stat %q: no command name", s)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("process stat: %d fields after the command name, want 13 or more", len(f))
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("process stat utime %q: %w", f[11], err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("process stat stime %q: %w", f[12], err)
	}
	return utime + stime, nil
}
