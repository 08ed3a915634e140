package retry

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	amqp "github.com/rabbitmq/amqp091-go"
)

// FuzzRetryCount checks that a retry count read from a header of any
// type and value is never negative nor above the cap, and is the value
// itself where the header holds a count in range.
func FuzzRetryCount(f *testing.F) {
	for _, seed := range []struct {
		kind uint8
		s    string
		n    int64
		fl   float64
	}{
		{0, "", 3, 0}, {3, "", -1, 0}, {3, "", math.MaxInt64, 0}, {8, "", -1, 0},
		{9, "", 0, 2.9}, {10, "", 0, math.NaN()}, {10, "", 0, math.Inf(1)}, {10, "", 0, -1e300},
		{11, " 12 ", 0, 0}, {11, "99999999999999999999999", 0, 0}, {11, "-5", 0, 0}, {12, "7", 0, 0},
		{13, "", 1, 0}, {14, "", 0, 0}, {15, "", 0, 0},
	} {
		f.Add(seed.kind, seed.s, seed.n, seed.fl)
	}
	f.Fuzz(func(t *testing.T, kind uint8, s string, n int64, fl float64) {
		h := amqp.Table{}
		// want is the count the header holds when it is a plain one in
		// range; -1 when anything in 0..cap will do.
		want := -1
		inRange := func(v int64) {
			switch {
			case v >= 0 && v <= 1<<30:
				want = int(v)
			case v < 0:
				want = 0
			}
		}
		switch kind % 16 {
		case 0:
			h[HeaderRetryCount] = int8(n)
			inRange(int64(int8(n)))
		case 1:
			h[HeaderRetryCount] = int16(n)
			inRange(int64(int16(n)))
		case 2:
			h[HeaderRetryCount] = int32(n)
			inRange(int64(int32(n)))
		case 3:
			h[HeaderRetryCount] = n
			inRange(n)
		case 4:
			h[HeaderRetryCount] = int(n)
			inRange(n)
		case 5:
			h[HeaderRetryCount] = uint8(n)
			inRange(int64(uint8(n)))
		case 6:
			h[HeaderRetryCount] = uint16(n)
			inRange(int64(uint16(n)))
		case 7:
			h[HeaderRetryCount] = uint32(n)
			inRange(int64(uint32(n)))
		case 8:
			h[HeaderRetryCount] = uint64(n)
			if uint64(n) <= 1<<30 {
				want = int(n)
			}
		case 9:
			h[HeaderRetryCount] = float32(fl)
		case 10:
			h[HeaderRetryCount] = fl
			if fl >= 0 && fl <= 1<<30 {
				want = int(fl)
			}
		case 11:
			h[HeaderRetryCount] = s
		case 12:
			h[HeaderRetryCount] = []byte(s)
			want = 0 // bytes are not a count
		case 13:
			h[HeaderRetryCount] = n%2 == 0
			want = 0
		case 14:
			h[HeaderRetryCount] = nil
			want = 0
		case 15:
			want = 0 // absent
		}
		got := RetryCount(h)
		if got < 0 || got > 1<<30 {
			t.Fatalf("RetryCount(%#v) = %d: out of 0..2^30", h[HeaderRetryCount], got)
		}
		if want >= 0 && got != want {
			t.Fatalf("RetryCount(%#v) = %d, want %d", h[HeaderRetryCount], got, want)
		}
	})
}

// FuzzHeaders builds header tables of any shape, with relay's and the
// broker's header names likely, and checks the readers and forward:
// Claim names a queue found in the headers or nothing, and Forward copies every header but the broker's
// per-hop ones without touching its input.
func FuzzHeaders(f *testing.F) {
	for _, h := range []amqp.Table{
		{},
		{"x-death": []any{amqp.Table{"queue": "email-queue", "reason": "rejected", "count": int64(3), "exchange": "",
			"time": time.Unix(1700000000, 0), "routing-keys": []any{"email"}}}, "x-first-death-queue": "email-queue"},
		{"x-death": []any{"junk", amqp.Table{"count": "many"}, amqp.Table{"queue": []byte("webhook-queue"), "count": int32(-4)}}},
		{"x-death": []any{amqp.Table{"count": int64(1 << 40)}, amqp.Table{"count": int64(7)}}},
		{HeaderOriginalQueue: "q", HeaderRetryCount: int32(2), HeaderDelay: int64(-1), HeaderRetryAfter: int64(5000), "custom": "keep"},
		{"x-last-death-queue": "", "x-death": "garbage", "x-first-death-queue": []byte("q")},
	} {
		f.Add(encodeTable(h))
	}
	f.Add([]byte{})
	f.Add([]byte{7, 0, 9, 3, 0, 8, 2, 9, 2, 6, 0, 9, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		h := (&tableReader{b: data}).table(0)
		before := cloneTable(h)

		if q, from := Claim(h); q != "" && !slices.Contains(stringsIn(h), q) || (q == "") != (from == "") {
			t.Fatalf("Claim = %q from %q, which the headers do not hold: %#v", q, from, h)
		}
		if e := lastError(h); e != "" && !slices.Contains(stringsIn(h), e) && !strings.Contains(e, "not recorded") {
			t.Fatalf("lastError = %q, which the headers do not hold: %#v", e, h)
		}
		out := Forward(h)
		if !cmp.Equal(h, before, cmpopts.EquateNaNs()) {
			t.Fatalf("forward changed its input: %#v, was %#v", h, before)
		}
		for _, k := range brokerHeaders {
			if _, ok := out[k]; ok {
				t.Fatalf("forward kept %s", k)
			}
		}
		for k, v := range h {
			if slices.Contains(brokerHeaders, k) {
				continue
			}
			if got, ok := out[k]; !ok || !cmp.Equal(got, v, cmpopts.EquateNaNs()) {
				t.Fatalf("forward lost or changed %s: %#v, want %#v", k, got, v)
			}
		}
		out["x-new"] = "added"
		if _, ok := h["x-new"]; ok {
			t.Fatalf("forward returned its input, not a copy")
		}
	})
}

// FuzzClampDelay checks that every delay fits the delayed-message
// plugin's range, is the delay itself in milliseconds where it fits, and
// that a longer delay never clamps to a shorter one.
func FuzzClampDelay(f *testing.F) {
	for _, d := range []int64{0, -1, 1, int64(time.Millisecond) - 1, int64(time.Millisecond), int64(5 * time.Second),
		int64(50 * 24 * time.Hour), math.MaxInt64, math.MinInt64} {
		f.Add(d, int64(time.Second))
	}
	f.Fuzz(func(t *testing.T, d, step int64) {
		got := clampDelay(time.Duration(d))
		if got < 1 || got > 1<<32-1 {
			t.Fatalf("clampDelay(%s) = %d: outside 1..2^32-1", time.Duration(d), got)
		}
		if ms := time.Duration(d).Milliseconds(); ms >= 1 && ms <= 1<<32-1 && got != ms {
			t.Fatalf("clampDelay(%s) = %d, want %d", time.Duration(d), got, ms)
		}
		if step >= 0 && d <= math.MaxInt64-step {
			if longer := clampDelay(time.Duration(d + step)); longer < got {
				t.Fatalf("clampDelay(%s) = %d, but the longer %s clamps to %d", time.Duration(d), got, time.Duration(d+step), longer)
			}
		}
	})
}

// tableReader turns fuzz bytes into a header table. Keys are mostly the
// names relay and the broker use, so the readers' paths are reached.
type tableReader struct{ b []byte }

var fuzzKeys = []string{
	"x-death", HeaderRetryCount, HeaderOriginalQueue, "x-last-death-queue", "x-first-death-queue",
	"queue", "count", "reason", HeaderDelay, HeaderRetryAfter, HeaderNotBefore, HeaderLastError, "custom",
}

func (r *tableReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *tableReader) take(n int) []byte {
	out := make([]byte, n)
	copy(out, r.b)
	r.b = r.b[min(n, len(r.b)):]
	return out
}

func (r *tableReader) str() string { return string(r.take(int(r.byte() % 64))) }

func (r *tableReader) key() string {
	if c := r.byte(); c < 128 {
		return fuzzKeys[int(c)%len(fuzzKeys)]
	}
	return r.str()
}

func (r *tableReader) table(depth int) amqp.Table {
	t := amqp.Table{}
	for range r.byte() % 8 {
		t[r.key()] = r.value(depth + 1)
	}
	return t
}

func (r *tableReader) value(depth int) any {
	switch r.byte() % 13 {
	case 0:
		return r.str()
	case 1:
		return []byte(r.str())
	case 2:
		return int32(int8(r.byte()))
	case 3:
		return int64(binary.BigEndian.Uint64(r.take(8)))
	case 4:
		return binary.BigEndian.Uint64(r.take(8))
	case 5:
		return math.Float64frombits(binary.BigEndian.Uint64(r.take(8)))
	case 6:
		return r.byte()%2 == 0
	case 7:
		return nil
	case 8:
		if depth > 3 {
			return nil
		}
		var a []any
		for range r.byte() % 6 {
			a = append(a, r.value(depth+1))
		}
		return a
	case 9:
		if depth > 3 {
			return nil
		}
		return r.table(depth)
	case 10:
		return time.Unix(int64(int32(binary.BigEndian.Uint32(r.take(4)))), 0)
	case 11:
		return int16(binary.BigEndian.Uint16(r.take(2)))
	default:
		return uint8(r.byte())
	}
}

// encodeTable writes the bytes tableReader reads back as t, for the seed
// corpus; it knows strings, byte slices, int32, int64, arrays and tables.
func encodeTable(t amqp.Table) []byte {
	out := []byte{byte(len(t))}
	for k, v := range t {
		if i := slices.Index(fuzzKeys, k); i >= 0 {
			out = append(out, byte(i))
		} else {
			out = append(out, 128, byte(len(k)))
			out = append(out, k...)
		}
		out = append(out, encodeValue(v)...)
	}
	return out
}

func encodeValue(v any) []byte {
	switch v := v.(type) {
	case string:
		return append([]byte{0, byte(len(v))}, v...)
	case []byte:
		return append([]byte{1, byte(len(v))}, v...)
	case int32:
		return []byte{2, byte(int8(v))}
	case int64:
		return binary.BigEndian.AppendUint64([]byte{3}, uint64(v))
	case []any:
		out := []byte{8, byte(len(v))}
		for _, e := range v {
			out = append(out, encodeValue(e)...)
		}
		return out
	case amqp.Table:
		return append([]byte{9}, encodeTable(v)...)
	case time.Time:
		return binary.BigEndian.AppendUint32([]byte{10}, uint32(v.Unix()))
	default:
		return []byte{7}
	}
}

// stringsIn lists every string and byte slice the table holds, at any
// depth.
func stringsIn(v any) []string {
	var out []string
	switch v := v.(type) {
	case string:
		out = append(out, v)
	case []byte:
		out = append(out, string(v))
	case amqp.Table:
		for _, e := range v {
			out = append(out, stringsIn(e)...)
		}
	case []any:
		for _, e := range v {
			out = append(out, stringsIn(e)...)
		}
	}
	return out
}

func cloneTable(t amqp.Table) amqp.Table {
	if t == nil {
		return nil
	}
	out := make(amqp.Table, len(t))
	for k, v := range t {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch v := v.(type) {
	case amqp.Table:
		return cloneTable(v)
	case []any:
		if v == nil {
			return v
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneValue(e)
		}
		return out
	case []byte:
		return bytes.Clone(v)
	default:
		return v
	}
}
