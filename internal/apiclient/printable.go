package apiclient

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable returns s fit for a terminal: every control character but
// line feed and tab (C0, DEL and C1, escape and carriage return among
// them) and every bidirectional control (U+061C, U+200E, U+200F,
// U+202A–U+202E, U+2066–U+2069) is written as a \uXXXX escape, and each
// byte that is not UTF-8 as \xNN. Headers, error texts and recipients come
// from whoever published a message or answered a request: printed as they
// are, they could retitle the terminal, move the cursor, hide or fake
// lines, or reverse what a line seems to say. A \uXXXX escape is also a
// JSON string escape of the same character, so JSON stays JSON.
func Printable(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || unsafeRune(r) {
			return true
		}
		i += n
	}
	return false
}

// unsafeRune reports whether r must not reach a terminal as it is.
func unsafeRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case unicode.IsControl(r): // C0, DEL, C1
		return true
	case r == '\u061c' || r == '\u200e' || r == '\u200f',
		r >= '\u202a' && r <= '\u202e',
		r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

// Terminal returns a writer that passes everything written to it through
// Printable on its way to w: a command that prints what others wrote
// (headers, errors, recipients) writes through it. A character split
// across two writes is held until it is whole.
func Terminal(w io.Writer) io.Writer {
	if t, ok := w.(*terminal); ok {
		return t
	}
	return &terminal{w: w}
}

type terminal struct {
	w       io.Writer
	pending []byte
}

func (t *terminal) Write(p []byte) (int, error) {
	buf := append(t.pending, p...)
	// Hold back an incomplete character at the end, at most 3 bytes.
	cut := len(buf)
	for k := 1; k <= 3 && k <= len(buf); k++ {
		if utf8.RuneStart(buf[len(buf)-k]) {
			if !utf8.FullRune(buf[len(buf)-k:]) {
				cut = len(buf) - k
			}
			break
		}
	}
	t.pending = append([]byte(nil), buf[cut:]...)
	if _, err := io.WriteString(t.w, Printable(string(buf[:cut]))); err != nil {
		return 0, err
	}
	return len(p), nil
}
