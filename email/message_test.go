package email

import (
	"bytes"
	"mime"
	netmail "net/mail"
	"regexp"
	"strings"
	"testing"
	"time"
)

// render builds the email newMsg makes of m and returns its raw bytes, as
// they would go to the server after DATA.
func render(t *testing.T, m Message, from string, now time.Time) []byte {
	t.Helper()
	addr, err := netmail.ParseAddress(from)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := newMsg(m, addr, now)
	if err != nil {
		t.Fatalf("newMsg: %v", err)
	}
	var buf bytes.Buffer
	if _, err := msg.WriteTo(&buf); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	return buf.Bytes()
}

// rawHeader returns the lines of header field name in raw, folded lines
// included, without their CRLFs.
func rawHeader(t *testing.T, raw []byte, name string) []string {
	t.Helper()
	head, _, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	if !ok {
		t.Fatalf("no end of header in:\n%s", raw)
	}
	var out []string
	for _, line := range strings.Split(string(head), "\r\n") {
		switch {
		case strings.HasPrefix(line, name+":"):
			out = append(out, line)
		case len(out) > 0 && (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")):
			out = append(out, line)
		case len(out) > 0:
			return out
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s header in:\n%s", name, head)
	}
	return out
}

func TestSubjectHeader(t *testing.T) {
	long := "Votre commande n°4242 a été expédiée — suivez-la, elle arrive bientôt chez vous à Zürich"
	tests := []struct {
		name    string
		subject string
		// want is the Subject header as written, lines joined by "|",
		// or "" to check its properties only.
		want string
	}{
		{"ascii", "Your order shipped", "Subject: Your order shipped"},
		{"ascii folded at a space",
			"Your order 4242 has shipped and is on its way to you, it should arrive by Thursday next week",
			"Subject: Your order 4242 has shipped and is on its way to you, it should|" +
				" arrive by Thursday next week"},
		{"non-ascii, short", "Café ☕", "Subject: =?UTF-8?q?Caf=C3=A9_=E2=98=95?="},
		{"non-ascii, too long for one line", long, ""},
		{"non-ascii first word beyond go-mail's fold", "Ünïcödé-ëvërÿwhërë-ïn-ä-sïnglë-wörd-thät-gøës-øn", ""},
		{"emoji", strings.Repeat("🚚", 20), ""},
		{"an ascii word longer than a line", "see https://example.com/" + strings.Repeat("x", 80), ""},
		{"looks like an encoded-word", "=?UTF-8?q?not_one?=", "Subject: =?UTF-8?q?=3D=3FUTF-8=3Fq=3Fnot=5Fone=3F=3D?="},
		{"control character", "tab\there", "Subject: =?UTF-8?q?tab=09here?="},
		{"double spaces kept", "a  b", "Subject: a  b"},
		{"998 bytes", strings.Repeat("é", 499), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := render(t, Message{ID: "n-1", To: []string{"ada@example.com"}, Subject: tt.subject, Text: "hi"},
				"relay@example.com", time.Unix(0, 0))
			lines := rawHeader(t, raw, "Subject")
			if tt.want != "" && strings.Join(lines, "|") != tt.want {
				t.Errorf("Subject header:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.ReplaceAll(tt.want, "|", "\n"))
			}
			if lines[0] == "Subject:" || strings.TrimSpace(strings.TrimPrefix(lines[0], "Subject:")) == "" {
				t.Errorf("the Subject's first line is empty: %q", lines)
			}
			if bytes.Contains(raw, []byte("Subject:\r\n")) {
				t.Errorf("raw email holds %q", "Subject:\r\n")
			}
			for _, l := range lines {
				if len(l) > maxLine && !strings.Contains(tt.subject, strings.TrimSpace(l)) {
					t.Errorf("line of %d characters, want at most %d: %q", len(l), maxLine, l)
				}
				if strings.TrimSpace(l) == "" {
					t.Errorf("a line of whitespace only in %q", lines)
				}
			}
			for _, w := range regexp.MustCompile(`=\?[^?]+\?[qQbB]\?[^?]*\?=`).FindAllString(strings.Join(lines, " "), -1) {
				if len(w) > 75 {
					t.Errorf("encoded-word of %d characters, RFC 2047 allows 75: %s", len(w), w)
				}
			}
			// Unfold as a reader does, then decode.
			m, err := netmail.ReadMessage(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			got, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
			if err != nil {
				t.Fatalf("decode %q: %v", m.Header.Get("Subject"), err)
			}
			if got != tt.subject {
				t.Errorf("decoded Subject = %q, want %q", got, tt.subject)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	now := time.Date(2026, 3, 1, 13, 4, 5, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		name, from string
		want       map[string]string
	}{
		{"plain address", "relay@example.com", map[string]string{
			"From": "<relay@example.com>", "Date": "Sun, 01 Mar 2026 12:04:05 +0000", "Message-ID": "<n-1@example.com>"}},
		{"display name", "Relay <relay@example.com>", map[string]string{
			"From": `"Relay" <relay@example.com>`, "Date": "Sun, 01 Mar 2026 12:04:05 +0000"}},
		{"quoted display name", `"Relay, the notifier" <relay@example.com>`, map[string]string{
			"From": `"Relay, the notifier" <relay@example.com>`}},
		{"non-ascii display name", "Relais Café <relay@example.com>", map[string]string{
			"From": "=?utf-8?q?Relais_Caf=C3=A9?= <relay@example.com>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := render(t, Message{ID: "n-1", To: []string{"ada@example.com"}, Subject: "s", Text: "hi"}, tt.from, now)
			for name, want := range tt.want {
				if got := strings.Join(rawHeader(t, raw, name), "\r\n"); got != name+": "+want {
					t.Errorf("%s header = %q, want %q", name, got, name+": "+want)
				}
			}
		})
	}
}

func TestHTMLOnlyGetsText(t *testing.T) {
	raw := render(t, Message{ID: "n-1", To: []string{"ada@example.com"}, Subject: "s",
		HTML: `<p>Track it <a href="https://example.com/t/1">here</a>.</p>`}, "relay@example.com", time.Now())
	for _, want := range []string{"Content-Type: multipart/alternative", "Content-Type: text/plain", "Content-Type: text/html",
		"Track it here (https://example.com/t/1)."} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("email lacks %q:\n%s", want, raw)
		}
	}
	// Without a word of text, the HTML goes alone.
	raw = render(t, Message{ID: "n-1", To: []string{"ada@example.com"}, Subject: "s", HTML: `<img src="cid:x">`},
		"relay@example.com", time.Now())
	if bytes.Contains(raw, []byte("text/plain")) || !bytes.Contains(raw, []byte("Content-Type: text/html")) {
		t.Errorf("an HTML body without text got a text part:\n%s", raw)
	}
}
