package apiclient

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestPrintable(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "timeout after 10s: ada@example.com", "timeout after 10s: ada@example.com"},
		{"lines and tabs stay", "a\tb\nc", "a\tb\nc"},
		{"unicode stays", "Zoë — 東京", "Zoë — 東京"},
		{"a title change", "\x1b]0;pwned\x07", `\u001b]0;pwned\u0007`},
		{"a colour", "\x1b[31mred\x1b[0m", `\u001b[31mred\u001b[0m`},
		{"carriage return fakes a line", "ok\rdelivered", `ok\u000ddelivered`},
		{"C1 CSI", "\u009b2J", `\u009b2J`},
		{"DEL", "a\x7fb", `a\u007fb`},
		{"bidi override", "exe.\u202etxt", `exe.\u202etxt`},
		{"bidi isolate", "\u2066x\u2069", `\u2066x\u2069`},
		{"not UTF-8", "a\xffb", `a\xffb`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Printable(tt.in); got != tt.want {
				t.Errorf("Printable(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestTerminal: whatever is written through Terminal reaches the terminal
// escaped, a character split across writes included, and JSON written
// through it decodes to the same value.
func TestTerminal(t *testing.T) {
	var out bytes.Buffer
	w := Terminal(&out)
	for _, p := range []string{"x-last-error: \x1b]0;", "pwned\x07 ", "\xe2\x80", "\xae", "done\n"} {
		if n, err := w.Write([]byte(p)); err != nil || n != len(p) {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if want := `x-last-error: \u001b]0;pwned\u0007 \u202edone` + "\n"; out.String() != want {
		t.Errorf("written %q, want %q", out.String(), want)
	}

	out.Reset()
	in := map[string]string{"error": "\u009b2J\u202e\x1b[A"}
	b, _ := json.Marshal(in)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	var back map[string]string
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back["error"] != in["error"] {
		t.Errorf("JSON through Terminal = %s, decodes to %q (%v)", out.Bytes(), back, err)
	}
	if bytes.ContainsAny(out.Bytes(), "\x1b\u009b\u202e") {
		t.Errorf("JSON through Terminal holds a raw control: %q", out.Bytes())
	}
}
