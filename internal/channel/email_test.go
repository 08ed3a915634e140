package channel_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"mime"
	"net"
	netmail "net/mail"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
)

// mailbox is a real SMTP server on 127.0.0.1 that keeps what it accepts.
type mailbox struct {
	port int
	mu   sync.Mutex
	got  []delivered
}

type delivered struct {
	from string
	data []byte
}

func startMailbox(t *testing.T) *mailbox {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mb := &mailbox{port: ln.Addr().(*net.TCPAddr).Port}
	srv := gosmtp.NewServer(gosmtp.BackendFunc(func(*gosmtp.Conn) (gosmtp.Session, error) {
		return &mailSession{mb: mb}, nil
	}))
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	srv.ErrorLog = log.New(io.Discard, "", 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return mb
}

func (mb *mailbox) messages() []delivered {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return append([]delivered(nil), mb.got...)
}

type mailSession struct {
	mb   *mailbox
	from string
}

func (s *mailSession) Mail(from string, _ *gosmtp.MailOptions) error { s.from = from; return nil }
func (s *mailSession) Rcpt(string, *gosmtp.RcptOptions) error        { return nil }
func (s *mailSession) Reset()                                        {}
func (s *mailSession) Logout() error                                 { return nil }
func (s *mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.mb.mu.Lock()
	defer s.mb.mu.Unlock()
	s.mb.got = append(s.mb.got, delivered{from: s.from, data: b})
	return nil
}

// TestEmailFrom checks that EMAIL_FROM may carry a display name: the From
// header shows it, the envelope sender and the Message-ID use the address
// alone.
func TestEmailFrom(t *testing.T) {
	tests := []struct {
		name, from   string
		wantName     string // the From header's display name, decoded
		wantAddress  string // the From header's address and MAIL FROM
		wantIDDomain string // the right-hand side of the Message-ID
	}{
		{"plain address", "relay@example.com", "", "relay@example.com", "example.com"},
		{"display name", "Relay <relay@example.com>", "Relay", "relay@example.com", "example.com"},
		{"quoted display name", `"Relay, notifications" <relay@mail.example.org>`, "Relay, notifications", "relay@mail.example.org", "mail.example.org"},
		{"non-ascii display name", "Relais Café <relay@example.com>", "Relais Café", "relay@example.com", "example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mb := startMailbox(t)
			env := map[string]string{"SMTP_HOST": "127.0.0.1", "SMTP_PORT": strconv.Itoa(mb.port), "SMTP_TLS": "none",
				"EMAIL_FROM": tt.from, "CONCURRENCY": "1", "SMTP_TIMEOUT": "5s"}
			send, closeSend, err := channel.Email.Open(func(k string) string { return env[k] }, nil)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer closeSend()
			part, _ := json.Marshal(channel.EmailPart{To: []string{"ada@example.com"}, Subject: "Ihre Bestellung wurde versandt – vielen Dank für Ihren Einkauf bei uns", HTML: "<p>Hallo</p>"})
			n := &notification.Notification{ID: "ntf-1", Channel: "email", Parts: map[string]json.RawMessage{"email": part}}
			if err := send(t.Context(), n); err != nil {
				t.Fatalf("send: %v", err)
			}
			got := mb.messages()
			if len(got) != 1 {
				t.Fatalf("the server got %d emails, want 1", len(got))
			}
			if got[0].from != tt.wantAddress {
				t.Errorf("MAIL FROM = %q, want %q", got[0].from, tt.wantAddress)
			}
			m, err := netmail.ReadMessage(bytes.NewReader(got[0].data))
			if err != nil {
				t.Fatal(err)
			}
			from, err := m.Header.AddressList("From")
			if err != nil || len(from) != 1 {
				t.Fatalf("From %q: %v", m.Header.Get("From"), err)
			}
			if from[0].Name != tt.wantName || from[0].Address != tt.wantAddress {
				t.Errorf("From = %q, want the name %q and the address %q", m.Header.Get("From"), tt.wantName, tt.wantAddress)
			}
			if id, want := m.Header.Get("Message-ID"), "<ntf-1@"+tt.wantIDDomain+">"; id != want {
				t.Errorf("Message-ID = %q, want %q", id, want)
			}
			if date, err := m.Header.Date(); err != nil || time.Since(date) > time.Minute || !strings.HasSuffix(m.Header.Get("Date"), "+0000") {
				t.Errorf("Date = %q (%v), want this attempt's time in UTC", m.Header.Get("Date"), err)
			}
			subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
			if err != nil || !strings.HasPrefix(subject, "Ihre Bestellung") {
				t.Errorf("Subject = %q (%v)", subject, err)
			}
			if bytes.Contains(got[0].data, []byte("Subject:\r\n")) {
				t.Errorf("the Subject starts on a line of its own:\n%s", got[0].data)
			}
		})
	}
}

// TestEmailFromInvalid checks that an EMAIL_FROM that is no address stops
// the worker with an error naming the variable.
func TestEmailFromInvalid(t *testing.T) {
	for _, from := range []string{"relay", "Relay <relay@example.com", "a@b, c@d"} {
		env := map[string]string{"EMAIL_FROM": from}
		_, _, err := channel.Email.Open(func(k string) string { return env[k] }, nil)
		if err == nil || !strings.Contains(err.Error(), "EMAIL_FROM") {
			t.Errorf("EMAIL_FROM=%q: Open = %v, want an error naming EMAIL_FROM", from, err)
		}
	}
}

// An email part goes out as one copy per recipient, each with the whole
// part but for its one address; a webhook part as one copy.
func TestCopiesPerRecipient(t *testing.T) {
	part := json.RawMessage(`{"to":["ok1@example.com","reject@example.com"],"subject":"Hi","text":"hello","html":"<p>hello</p>"}`)
	copies, err := channel.Email.Copies(part)
	if err != nil {
		t.Fatal(err)
	}
	if !channel.Email.PerRecipient() || len(copies) != 2 {
		t.Fatalf("email copies = %d (per recipient %v), want 2", len(copies), channel.Email.PerRecipient())
	}
	for i, want := range []string{"ok1@example.com", "reject@example.com"} {
		var p channel.EmailPart
		if err := json.Unmarshal(copies[i].Part, &p); err != nil {
			t.Fatal(err)
		}
		if copies[i].Recipient != want || len(p.To) != 1 || p.To[0] != want || p.Subject != "Hi" || p.Text != "hello" || p.HTML != "<p>hello</p>" {
			t.Errorf("copy %d = %s for %q, want the part to %s alone", i, copies[i].Part, copies[i].Recipient, want)
		}
	}
	hook := json.RawMessage(`{"url":"https://example.com/hook","payload":{}}`)
	copies, err = channel.Webhook.Copies(hook)
	if err != nil || len(copies) != 1 || copies[0].Recipient != "" || string(copies[0].Part) != string(hook) || channel.Webhook.PerRecipient() {
		t.Errorf("webhook copies = %+v, %v: want the part once, unchanged", copies, err)
	}
	if _, err := channel.Email.Copies(json.RawMessage(`{"to":"x"}`)); err == nil {
		t.Error("a part that does not decode split without an error")
	}
}

// TestEmailRecipientSpellings sends the spellings a hostile client tries:
// a domain literal that points the mail server at an address of its
// choosing, and other spellings of a mailbox already named, which would
// send it a second email.
func TestEmailRecipientSpellings(t *testing.T) {
	tests := []struct {
		name string
		to   []string
		want []string // fields at fault
	}{
		{"plain", []string{"ada@example.com", "grace@example.com"}, nil},
		{"non-ASCII", []string{"ädä@exämple.com"}, nil},
		{"domain literal", []string{"ada@[127.0.0.1]"}, []string{"email.to[0]"}},
		{"domain literal among good ones", []string{"ada@example.com", "grace@[10.0.0.1]"}, []string{"email.to[1]"}},
		{"angle brackets again", []string{"ada@example.com", "<ada@example.com>"}, []string{"email.to[1]"}},
		{"angle brackets first", []string{"<ada@example.com>", "ada@example.com"}, []string{"email.to[0]"}},
		{"quoted local part", []string{"ada@example.com", `"ada"@example.com`}, []string{"email.to[1]"}},
		{"spaces", []string{" ada@example.com"}, []string{"email.to[0]"}},
		{"comment", []string{"ada@example.com (me)"}, []string{"email.to[0]"}},
		{"case", []string{"ada@example.com", "ADA@example.COM"}, []string{"email.to[1]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := channel.EmailPart{To: tt.to, Subject: "Hi", Text: "x"}
			var got []string
			for _, e := range channel.Email.Check(&p) {
				got = append(got, e.Field)
				if tt.name == "domain literal" && !strings.Contains(e.Message, "domain literal") {
					t.Errorf("message %q does not name the domain literal", e.Message)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("fields at fault = %q, want %q", got, tt.want)
			}
		})
	}
}
