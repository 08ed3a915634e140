package peers

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/relay-demo/relay/internal/testenv"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name      string
		stat      string
		wantComm  string
		wantTicks uint64
		wantErr   bool
	}{
		{
			name:     "postgres backend",
			stat:     "2216 (postgres) S 1 2216 2216 0 -1 4194560 1961 40316 0 0 12 34 56 78 20 0 1 0 1093 225189888 7144 18446744073709551615",
			wantComm: "postgres", wantTicks: 12 + 34 + 56 + 78,
		},
		{
			name:     "a name with spaces and parentheses",
			stat:     "42 (a (b) c) R 1 42 42 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 5 6 7",
			wantComm: "a (b) c", wantTicks: 10,
		},
		{name: "no name", stat: "42 R 1", wantErr: true},
		{name: "too short", stat: "42 (x) R 1 2 3", wantErr: true},
		{name: "not a number", stat: "42 (x) R 1 42 42 0 -1 0 0 0 0 0 u 2 3 4 20", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			comm, ticks, err := parseStat([]byte(tt.stat))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseStat error = %v, want error %v", err, tt.wantErr)
			}
			if comm != tt.wantComm || ticks != tt.wantTicks {
				t.Errorf("parseStat = %q, %d; want %q, %d", comm, ticks, tt.wantComm, tt.wantTicks)
			}
		})
	}
}

func TestServerCPUOfNoProcess(t *testing.T) {
	if _, ok := serverCPU(Server("no-such-server"), nil); ok {
		t.Error("serverCPU found processes of a server that does not exist")
	}
}

// TestListeners finds this test's own listener by its port, and nothing on
// a port no process of that name listens on.
func TestListeners(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		testenv.Unavailable(t, "no /proc, which the peers benchmark reads each process's listeners from: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	got := listeners(strings.TrimSpace(string(comm)), port)
	if !got[strconv.Itoa(os.Getpid())] || len(got) != 1 {
		t.Errorf("listeners(self, %d) = %v, want this process alone", port, got)
	}
	if got := listeners("no-such-server", port); got != nil {
		t.Errorf("listeners(no-such-server) = %v, want nil", got)
	}
}
