package peers

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Server is the kind of server a system runs on, named for the processes
// whose CPU time counts as the server's.
type Server string

// The servers.
const (
	RabbitMQ   Server = "rabbitmq"
	Redis      Server = "redis"
	PostgreSQL Server = "postgres"
)

// comm is the process name (/proc/<pid>/comm) of a server's processes:
// RabbitMQ's Erlang VM, redis-server, and every PostgreSQL process (the
// postmaster, its backends and background workers).
func (s Server) comm() string {
	switch s {
	case RabbitMQ:
		return "beam.smp"
	case Redis:
		return "redis-server"
	case PostgreSQL:
		return "postgres"
	}
	return ""
}

// userHZ is the unit of the CPU times in /proc/<pid>/stat: fixed at 100 by
// the kernel's user-space ABI on every architecture Go runs Linux on.
const userHZ = 100

// serverCPU sums the CPU time of every process of s on this machine: user
// and system time, plus the time of the children each has waited for.
// The children's part is what makes PostgreSQL countable: a backend that
// serves one connection of the run and exits before the second reading
// would otherwise vanish with its CPU time, which the postmaster collects
// when it reaps it. ok is false when no process of s is visible (another
// PID namespace, another machine).
//
// only, when not nil, narrows the count to those processes: the broker
// listening on the AMQP URL's port, on a machine with several.
func serverCPU(s Server, only map[string]bool) (total time.Duration, ok bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil || (only != nil && !only[e.Name()]) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		comm, ticks, err := parseStat(stat)
		if err != nil || comm != s.comm() {
			continue
		}
		total += time.Duration(ticks) * time.Second / userHZ
		ok = true
	}
	return total, ok
}

// parseStat reads the command name and utime + stime + cutime + cstime
// from a /proc/<pid>/stat line. The command name, in parentheses, may
// hold spaces and parentheses: the fields are counted from the last ')'.
func parseStat(stat []byte) (comm string, ticks uint64, err error) {
	s := string(stat)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, fmt.Errorf("process stat %q: no command name", s)
	}
	f := strings.Fields(s[end+1:])
	// f[0] is field 3 (state); utime, stime, cutime, cstime are fields
	// 14 to 17.
	if len(f) < 15 {
		return "", 0, fmt.Errorf("process stat: %d fields after the command name, want 15 or more", len(f))
	}
	for _, i := range []int{11, 12, 13, 14} {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return "", 0, fmt.Errorf("process stat field %d %q: %w", i+3, f[i], err)
		}
		ticks += v
	}
	return s[open+1 : end], ticks, nil
}

// listeners are the processes named comm with a socket listening on port
// (from /proc/net/tcp and tcp6), by PID; nil when none is seen, and then
// every process of the server counts.
func listeners(comm string, port int) map[string]bool {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for i, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if i == 0 || len(f) < 10 || f[3] != "0A" {
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue // self, thread-self and the like
		}
		c, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		fds, _ := os.ReadDir("/proc/" + e.Name() + "/fd")
		for _, fd := range fds {
			if link, err := os.Readlink("/proc/" + e.Name() + "/fd/" + fd.Name()); err == nil && inodes[link] {
				out[e.Name()] = true
				break
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
