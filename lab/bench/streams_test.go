package bench

import (
	"net"
	"strings"
	"testing"
	"time"
)

func TestSourceAddress(t *testing.T) {
	tests := []struct {
		k    int
		want string
	}{
		{0, "127.0.1.1"},
		{1, "127.0.1.2"},
		{249, "127.0.1.250"},
		{250, "127.0.2.1"},
		{MaxStreams/streamsPerAddress - 1, "127.0.1.100"},
	}
	for _, tt := range tests {
		got := sourceAddress(tt.k)
		if got.String() != tt.want || !got.IsLoopback() {
			t.Errorf("sourceAddress(%d) = %s, want loopback %s", tt.k, got, tt.want)
		}
	}
	if ip := net.ParseIP("127.0.1.1"); !sourceAddress(0).Equal(ip) {
		t.Errorf("sourceAddress(0) = %s", sourceAddress(0))
	}
}

func TestStreamsParagraph(t *testing.T) {
	r := &Report{Options: Options{Streams: 1500}, StreamsSettled: 1250 * time.Millisecond, Rows: []Row{
		{Queue: "classic", Figure: FigStreamsIdle, Unit: UnitMiB, Relay: ptr(30)},
		{Queue: "classic", Figure: FigStreamsOpen, Unit: UnitMiB, Relay: ptr(75), Target: &Target{Kind: AtMost, Value: maxStreamsMiB}},
		{Queue: "classic", Figure: FigStreamsClosed, Unit: UnitMiB, Relay: ptr(31), Target: &Target{Kind: AtMost, Value: 33}},
	}}
	var b strings.Builder
	if err := r.Render(&b, "markdown"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"1500 idle dashboard event streams",
		"**Dashboard event streams.**",
		"75 loopback addresses",
		"(classic queues)",
		"30.0 MiB idle; 75.0 MiB with 1,500 idle, authenticated event streams open (target ≤ 100 MiB, met), 31 KiB per stream",
		"31.0 MiB once they had closed, 1.25s later (target ≤ 33 MiB, met)",
		"`debug.FreeOSMemory`",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the page lacks %q:\n%s", want, b.String())
		}
	}
}
