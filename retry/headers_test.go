package retry

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"
)

func TestRetryCount(t *testing.T) {
	tests := []struct {
		name string
		h    amqp.Table
		want int
	}{
		{"absent", amqp.Table{}, 0},
		{"nil table", nil, 0},
		{"int8", amqp.Table{HeaderRetryCount: int8(2)}, 2},
		{"int16", amqp.Table{HeaderRetryCount: int16(3)}, 3},
		{"int32", amqp.Table{HeaderRetryCount: int32(4)}, 4},
		{"int64", amqp.Table{HeaderRetryCount: int64(5)}, 5},
		{"uint8", amqp.Table{HeaderRetryCount: uint8(6)}, 6},
		{"uint16", amqp.Table{HeaderRetryCount: uint16(7)}, 7},
		{"uint32", amqp.Table{HeaderRetryCount: uint32(8)}, 8},
		{"float64", amqp.Table{HeaderRetryCount: float64(9)}, 9},
		{"decimal string", amqp.Table{HeaderRetryCount: " 10 "}, 10},
		{"garbled string", amqp.Table{HeaderRetryCount: "ten"}, 0},
		{"negative", amqp.Table{HeaderRetryCount: int32(-3)}, 0},
		{"wrong type", amqp.Table{HeaderRetryCount: []byte{1}}, 0},
		{"boolean", amqp.Table{HeaderRetryCount: true}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RetryCount(tt.h); got != tt.want {
				t.Errorf("RetryCount = %d, want %d", got, tt.want)
			}
		})
	}
}

func death(queue string, count any) amqp.Table {
	return amqp.Table{"queue": queue, "reason": "rejected", "count": count, "exchange": ""}
}

func TestClaim(t *testing.T) {
	tests := []struct {
		name       string
		h          amqp.Table
		wantQueue  string
		wantHeader string
	}{
		{"the broker's newest x-death entry wins", amqp.Table{HeaderOriginalQueue: "victim", "x-last-death-queue": "other",
			"x-death": []any{death("email-queue", int64(1))}}, "email-queue", "x-death"},
		{"x-last-death-queue (3.13+)", amqp.Table{"x-last-death-queue": "webhook-queue", HeaderOriginalQueue: "victim"}, "webhook-queue", "x-last-death-queue"},
		{"relay's own header when the broker wrote nothing", amqp.Table{HeaderOriginalQueue: "email-queue"}, "email-queue", HeaderOriginalQueue},
		{"x-death newest first", amqp.Table{"x-death": []any{death("webhook-queue", int32(2)), death("email-queue", int64(3))}}, "webhook-queue", "x-death"},
		{"x-death count as int16", amqp.Table{"x-death": []any{death("q", int16(4))}}, "q", "x-death"},
		{"x-death count as uint8", amqp.Table{"x-death": []any{death("q", uint8(4))}}, "q", "x-death"},
		{"a garbled newest entry is not skipped over", amqp.Table{"x-death": []any{"junk", death("q", "x")}}, "", ""},
		{"x-first-death-queue is never read", amqp.Table{"x-death": "junk", "x-first-death-queue": "first"}, "", ""},
		{"a number is not a queue", amqp.Table{HeaderOriginalQueue: int32(42)}, "", ""},
		{"nothing", amqp.Table{}, "", ""},
		{"huge counts", amqp.Table{"x-death": []any{death("q", int64(1<<62)), death("q", int64(1<<62))}}, "q", "x-death"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if q, h := Claim(tt.h); q != tt.wantQueue || h != tt.wantHeader {
				t.Errorf("Claim = %q from %q, want %q from %q", q, h, tt.wantQueue, tt.wantHeader)
			}
		})
	}
}

func TestLastError(t *testing.T) {
	tests := []struct {
		name string
		h    amqp.Table
		want string
	}{
		{"relay's header", amqp.Table{HeaderLastError: "452 mailbox full", "x-death": []any{death("q", int64(1))}}, "452 mailbox full"},
		{"the broker's reason", amqp.Table{"x-death": []any{death("email-queue", int64(1))}}, "rejected by email-queue (the error text was not recorded)"},
		{"nothing", amqp.Table{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lastError(tt.h); got != tt.want {
				t.Errorf("lastError = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDestination(t *testing.T) {
	topo := Topology{Prefix: "p.", Routes: []Route{{Queue: "email-queue", Key: "email"}}, Backend: TTL}
	tests := []struct {
		queue string
		want  bool
	}{
		{"p.email-queue", true},
		{"email-queue", false}, // unprefixed: another application's
		{"p.error-queue", false},
		{"p.requeue-queue", false},
		{"p.wait.1s", false},
		{"p.dead-letter-queue", false},
		{"", false},
		{"victim", false},
	}
	for _, tt := range tests {
		t.Run(tt.queue, func(t *testing.T) {
			if got := topo.Destination(tt.queue); got != tt.want {
				t.Errorf("Destination(%q) = %t, want %t", tt.queue, got, tt.want)
			}
		})
	}
}

func TestForwardStripsBrokerHeaders(t *testing.T) {
	in := amqp.Table{
		"x-death": []any{death("q", int64(1))}, "x-first-death-queue": "q", "x-last-death-reason": "rejected",
		HeaderDelay: int64(-500), HeaderRetryAfter: int64(3000), HeaderRetryCount: int32(1), "priority": "high",
	}
	got := Forward(in)
	want := amqp.Table{HeaderRetryCount: int32(1), "priority": "high"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("forward (-want +got):\n%s", diff)
	}
	if _, ok := in["x-death"]; !ok {
		t.Error("forward changed its input")
	}
}

func TestClampDelay(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want int64
	}{
		{-time.Second, 1},
		{0, 1},
		{500 * time.Microsecond, 1},
		{1500 * time.Millisecond, 1500},
		{100 * 24 * time.Hour, 1<<32 - 1},
	}
	for _, tt := range tests {
		if got := clampDelay(tt.in); got != tt.want {
			t.Errorf("clampDelay(%s) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	if got := truncate("short", 10); got != "short" {
		t.Errorf("truncate short = %q", got)
	}
	got := truncate(strings.Repeat("é", 10), 5) // 2 bytes a rune: cut at 4
	if got != "éé…" {
		t.Errorf("truncate mid-rune = %q, want %q", got, "éé…")
	}
}

func TestErrors(t *testing.T) {
	base := errors.New("boom")
	if Permanent(nil) != nil || After(nil, time.Second) != nil {
		t.Error("wrapping nil must stay nil")
	}
	if !IsPermanent(Permanent(base)) || IsPermanent(base) {
		t.Error("IsPermanent misreads")
	}
	wrapped := errors.Join(errors.New("outer"), Permanent(base))
	if !IsPermanent(wrapped) || !errors.Is(wrapped, base) {
		t.Error("Permanent must survive wrapping and unwrap to its cause")
	}
	if d, ok := RetryAfter(After(base, 3*time.Second)); !ok || d != 3*time.Second {
		t.Errorf("RetryAfter = %s %v", d, ok)
	}
	if _, ok := RetryAfter(After(base, 0)); ok {
		t.Error("a zero wait must not count as a hint")
	}
}

func TestCopy(t *testing.T) {
	const header = "x-recipient"
	for _, c := range []struct {
		value any
		want  string
	}{
		{nil, ""},
		{"ada@example.com", "ada@example.com"},
		{[]byte("ada@example.com"), "ada@example.com"},
		{int32(7), ""},
		{strings.Repeat("a", MaxCopyLength), strings.Repeat("a", MaxCopyLength)},
		{strings.Repeat("a", MaxCopyLength+1), ""},
		{"ada@example.com\r\nBcc: eve@example.com", ""},
		{"\xff@example.com", ""},
	} {
		h := amqp.Table{}
		if c.value != nil {
			h[header] = c.value
		}
		if got := (Topology{CopyHeader: header}).Copy(h); got != c.want {
			t.Errorf("Copy(%q) = %q, want %q", c.value, got, c.want)
		}
		if got := (Topology{}).Copy(h); got != "" {
			t.Errorf("Copy(%q) with no CopyHeader = %q, want none", c.value, got)
		}
	}
}

func TestTenant(t *testing.T) {
	const header = "x-tenant"
	for _, c := range []struct {
		value any
		want  string
	}{
		{nil, ""},
		{"acme", "acme"},
		{[]byte("acme"), "acme"},
		{int32(7), ""},
		{strings.Repeat("a", MaxCopyLength+1), ""},
		{"acme\nglobex", ""},
	} {
		h := amqp.Table{}
		if c.value != nil {
			h[header] = c.value
		}
		if got := (Topology{TenantHeader: header}).Tenant(h); got != c.want {
			t.Errorf("Tenant(%q) = %q, want %q", c.value, got, c.want)
		}
		if got := (Topology{TenantHeader: header, CopyHeader: "x-recipient"}).Copy(h); got != "" {
			t.Errorf("Copy(%q) with the tenant in another header = %q, want none", c.value, got)
		}
		if got := (Topology{}).Tenant(h); got != "" {
			t.Errorf("Tenant(%q) with no TenantHeader = %q, want none", c.value, got)
		}
	}
}
