package email

import (
	"strings"
	"unicode/utf8"
)

// maxLine is the longest header line subjectValue writes: RFC 2047 (section
// 2) limits a line holding an encoded-word to 76 characters, and RFC 5322
// asks for no more than 78.
const maxLine = 76

// subjectValue returns the body of the header field name ("Subject") for
// subj, folded so that every line, the field name included, fits in
// maxLine, and the first line holds text: the field never starts with
// "Subject:" alone on its line, as go-mail v0.8.1 writes a subject whose
// first encoded-word does not fit beside the field name (its writeHeader
// folds before any word too long for what is left of the line, the first
// one included).
//
// A subject of printable ASCII whose words fit is folded at its spaces and
// stays readable as it is. Anything else (non-ASCII text, control
// characters, text that looks like an encoded-word, a word too long for a
// line) is written as RFC 2047 encoded-words, Q encoding in UTF-8, each on
// its own line, split between characters and never inside one.
func subjectValue(name, subj string) string {
	if v, ok := foldPlain(name, subj); ok {
		return v
	}
	return encodeWords(name, subj)
}

// foldPlain folds s at its spaces. It reports false when s needs encoding
// or holds a word too long for a line of its own.
func foldPlain(name, s string) (string, bool) {
	if strings.Contains(s, "=?") {
		// A decoder would read it as an encoded-word.
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return "", false
		}
	}
	var b strings.Builder
	line := len(name) + len(": ")
	for i, w := range strings.Split(s, " ") {
		if i == 0 {
			if line+len(w) > maxLine {
				return "", false
			}
			b.WriteString(w)
			line += len(w)
			continue
		}
		switch {
		case w != "" && line+1+len(w) > maxLine:
			// The space moves to the start of the next line: unfolding
			// (removing the CRLF) gives the subject back.
			if 1+len(w) > maxLine {
				return "", false
			}
			b.WriteString("\r\n ")
			line = 1
		default:
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	return b.String(), true
}

// encodeWords writes s as a run of Q-encoded words, one per line, the first
// sized to fit beside the field name.
func encodeWords(name, s string) string {
	const open, closing = "=?UTF-8?q?", "?="
	var b strings.Builder
	room := maxLine - len(name) - len(": ") - len(open) - len(closing)
	used := 0
	b.WriteString(open)
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		char := s[:size]
		if r == utf8.RuneError && size == 1 {
			// Not UTF-8: the replacement character stands in for the
			// byte, so the word stays valid UTF-8.
			char = string(utf8.RuneError)
		}
		enc := qEncode(char)
		if used > 0 && used+len(enc) > room {
			b.WriteString(closing + "\r\n " + open)
			room = maxLine - len(" ") - len(open) - len(closing)
			used = 0
		}
		b.WriteString(enc)
		used += len(enc)
		s = s[size:]
	}
	b.WriteString(closing)
	return b.String()
}

// qEncode writes the bytes of one character in RFC 2047's Q encoding, as
// an encoded-word in a header's text allows (section 5, rule 3): letters,
// digits and !*+-/ as they are, a space as "_", anything else as =XX.
func qEncode(char string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(char); i++ {
		c := char[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("!*+-/", c) >= 0:
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('_')
		default:
			b.WriteByte('=')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0x0f])
		}
	}
	return b.String()
}
