package email_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	netmail "net/mail"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"
	"github.com/google/go-cmp/cmp"
	mail "github.com/wneessen/go-mail"

	"github.com/relay-demo/relay/email"
	"github.com/relay-demo/relay/retry"
)

// Recipients the test server treats specially. Any other address is
// accepted.
const (
	rcptOK       = "ada@example.com"
	rcptBusy     = "busy@example.com"     // 451 to RCPT
	rcptGone     = "gone@example.com"     // 550 to RCPT
	rcptDataBusy = "databusy@example.com" // 451 after DATA
	rcptDataGone = "datagone@example.com" // 554 after DATA
	rcptDrop     = "drop@example.com"     // the server hangs up at RCPT
	rcptHang     = "hang@example.com"     // the server never answers RCPT
)

const fromAddr = "noreply@example.com"

// smtpServer is a real SMTP server on 127.0.0.1 that records what it
// accepts and answers according to the recipient.
type smtpServer struct {
	port int
	ln   *countingListener

	rcptReplies map[string]*gosmtp.SMTPError
	dataReplies map[string]*gosmtp.SMTPError

	// parked receives a value each time a handler starts waiting on an
	// rcptHang recipient; release, closed when the test ends, frees them.
	parked  chan struct{}
	release chan struct{}

	mu       sync.Mutex
	received []receivedMail
}

type receivedMail struct {
	From string
	To   []string
	Data []byte
}

// startServer runs a server for the length of the test. With TLSStartTLS it
// offers STARTTLS, with TLSImplicit it speaks TLS from the first byte, both
// with a self-signed certificate.
func startServer(t *testing.T, mode email.TLSPolicy) *smtpServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpServer{
		port: l.Addr().(*net.TCPAddr).Port,
		ln:   &countingListener{Listener: l},
		rcptReplies: map[string]*gosmtp.SMTPError{
			rcptBusy: {Code: 451, EnhancedCode: gosmtp.EnhancedCode{4, 2, 1}, Message: "mailbox busy, try later"},
			rcptGone: {Code: 550, EnhancedCode: gosmtp.EnhancedCode{5, 1, 1}, Message: "no such user"},
		},
		dataReplies: map[string]*gosmtp.SMTPError{
			rcptDataBusy: {Code: 451, EnhancedCode: gosmtp.EnhancedCode{4, 3, 0}, Message: "queue full, try later"},
			rcptDataGone: {Code: 554, EnhancedCode: gosmtp.EnhancedCode{5, 6, 0}, Message: "content rejected"},
		},
		parked:  make(chan struct{}, 1),
		release: make(chan struct{}),
	}

	srv := gosmtp.NewServer(gosmtp.BackendFunc(func(c *gosmtp.Conn) (gosmtp.Session, error) {
		return &testSession{srv: s, conn: c}, nil
	}))
	srv.Domain = "localhost"
	srv.ErrorLog = log.New(io.Discard, "", 0)
	var serve net.Listener = s.ln
	switch mode {
	case email.TLSStartTLS:
		srv.TLSConfig = serverTLS(t)
	case email.TLSImplicit:
		srv.TLSConfig = serverTLS(t)
		serve = tls.NewListener(s.ln, srv.TLSConfig)
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(serve)
	}()
	t.Cleanup(func() {
		// Close the listener too: a Serve that had not started yet when
		// srv.Close ran would otherwise wait for a connection forever.
		_ = srv.Close()
		_ = s.ln.Close()
		<-done
	})
	// Registered last so it runs first: parked handlers must let go before
	// the server shuts down.
	t.Cleanup(func() { close(s.release) })
	return s
}

func (s *smtpServer) messages() []receivedMail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]receivedMail(nil), s.received...)
}

type testSession struct {
	srv  *smtpServer
	conn *gosmtp.Conn
	from string
	to   []string
}

func (s *testSession) Mail(from string, _ *gosmtp.MailOptions) error {
	s.from = from
	return nil
}

func (s *testSession) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	switch to {
	case rcptDrop:
		_ = s.conn.Conn().Close()
		return errors.New("hanging up")
	case rcptHang:
		select {
		case s.srv.parked <- struct{}{}:
		default:
		}
		<-s.srv.release
		return errors.New("test over")
	}
	if reply, ok := s.srv.rcptReplies[to]; ok {
		return reply
	}
	s.to = append(s.to, to)
	return nil
}

func (s *testSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	for _, to := range s.to {
		if reply, ok := s.srv.dataReplies[to]; ok {
			return reply
		}
	}
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	s.srv.received = append(s.srv.received, receivedMail{From: s.from, To: s.to, Data: data})
	return nil
}

func (s *testSession) Reset() { s.from, s.to = "", nil }

func (s *testSession) Logout() error { return nil }

// countingListener counts the connections it accepts and can cut them all
// from the server's side.
type countingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *countingListener) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (l *countingListener) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
}

// startSilentServer accepts connections and never says a word on them.
func startSilentServer(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().(*net.TCPAddr).Port
}

// serverTLS returns a TLS config with a fresh self-signed certificate for
// 127.0.0.1.
func serverTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "relay test smtp"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		MinVersion:   tls.VersionTLS12,
	}
}

// newSender makes a Sender for the server on port, changed by edit, and
// closes it when the test ends.
func newSender(t *testing.T, port int, mode email.TLSPolicy, edit func(*email.Config)) *email.Sender {
	t.Helper()
	cfg := email.Config{
		Host:               "127.0.0.1",
		Port:               port,
		TLS:                mode,
		From:               "Relay <" + fromAddr + ">",
		Timeout:            5 * time.Second,
		InsecureSkipVerify: mode != email.TLSNone,
	}
	if edit != nil {
		edit(&cfg)
	}
	s, err := email.NewSender(cfg)
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func message(id string, to ...string) email.Message {
	return email.Message{ID: id, To: to, Subject: "Your order " + id, Text: "Hello Ada"}
}

// parseMail splits a received email into its headers and its bodies, the
// latter keyed by media type and decoded.
func parseMail(t *testing.T, raw []byte) (netmail.Header, map[string]string) {
	t.Helper()
	m, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("read message: %v", err)
	}
	bodies := map[string]string{}
	collectBodies(t, textproto.MIMEHeader(m.Header), m.Body, bodies)
	return m.Header, bodies
}

func collectBodies(t *testing.T, h textproto.MIMEHeader, body io.Reader, into map[string]string) {
	t.Helper()
	mediaType, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		t.Fatalf("content type %q: %v", h.Get("Content-Type"), err)
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Fatalf("next part: %v", err)
			}
			collectBodies(t, part.Header, part, into)
		}
	}
	// multipart.Reader decodes quoted-printable parts itself and hides the
	// header; only a single-part email gets here still encoded.
	if strings.EqualFold(h.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	// Text travels with CRLF line ends.
	into[mediaType] = strings.ReplaceAll(strings.TrimRight(string(b), "\r\n"), "\r\n", "\n")
}

func TestSendDelivers(t *testing.T) {
	tests := []struct {
		name       string
		text, html string
		want       map[string]string
	}{
		{
			name: "text and html",
			text: "Hello Ada, your order shipped.",
			html: "<p>Hello Ada, your order <b>shipped</b>.</p>",
			want: map[string]string{
				"text/plain": "Hello Ada, your order shipped.",
				"text/html":  "<p>Hello Ada, your order <b>shipped</b>.</p>",
			},
		},
		{
			name: "text only",
			text: "Hello Ada",
			want: map[string]string{"text/plain": "Hello Ada"},
		},
		{
			name: "html only gets a text alternative",
			html: `<p>Hello Ada,</p><p>your order <a href="https://shop.example/o/42?a=1&amp;b=2">shipped</a>&nbsp;&mdash; thanks!</p>`,
			want: map[string]string{
				"text/plain": "Hello Ada,\n\nyour order shipped (https://shop.example/o/42?a=1&b=2) \u2014 thanks!",
				"text/html":  `<p>Hello Ada,</p><p>your order <a href="https://shop.example/o/42?a=1&amp;b=2">shipped</a>&nbsp;&mdash; thanks!</p>`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, email.TLSNone)
			s := newSender(t, srv.port, email.TLSNone, nil)

			err := s.Send(t.Context(), email.Message{
				ID:      "ntf-42",
				To:      []string{rcptOK, "bob@example.org"},
				Subject: "Your order shipped",
				Text:    tt.text,
				HTML:    tt.html,
			})
			if err != nil {
				t.Fatalf("Send: %v", err)
			}

			got := srv.messages()
			if len(got) != 1 {
				t.Fatalf("server received %d emails, want 1", len(got))
			}
			envelope := []string{got[0].From, strings.Join(got[0].To, ",")}
			if diff := cmp.Diff([]string{fromAddr, rcptOK + ",bob@example.org"}, envelope); diff != "" {
				t.Errorf("envelope (-want +got):\n%s", diff)
			}
			h, bodies := parseMail(t, got[0].Data)
			headers := map[string]string{
				"Message-ID":        h.Get("Message-ID"),
				"X-Notification-ID": h.Get("X-Notification-ID"),
				"Subject":           h.Get("Subject"),
				"From":              h.Get("From"),
				"To":                h.Get("To"),
			}
			wantHeaders := map[string]string{
				"Message-ID":        "<ntf-42@example.com>",
				"X-Notification-ID": "ntf-42",
				"Subject":           "Your order shipped",
				"From":              `"Relay" <noreply@example.com>`,
				"To":                "<ada@example.com>, <bob@example.org>",
			}
			if diff := cmp.Diff(wantHeaders, headers); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, bodies); diff != "" {
				t.Errorf("bodies (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSendReusesConnection(t *testing.T) {
	srv := startServer(t, email.TLSNone)
	s := newSender(t, srv.port, email.TLSNone, nil)

	for _, id := range []string{"n-1", "n-2", "n-3"} {
		if err := s.Send(t.Context(), message(id, rcptOK)); err != nil {
			t.Fatalf("Send %s: %v", id, err)
		}
	}
	if got := len(srv.messages()); got != 3 {
		t.Errorf("server received %d emails, want 3", got)
	}
	if got := srv.ln.accepted(); got != 1 {
		t.Errorf("server accepted %d connections, want 1", got)
	}
}

func TestSendConcurrent(t *testing.T) {
	srv := startServer(t, email.TLSNone)
	s := newSender(t, srv.port, email.TLSNone, nil)

	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- s.Send(t.Context(), message(fmt.Sprintf("n-%d", i), rcptOK)) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("Send: %v", err)
		}
	}
	if got := len(srv.messages()); got != n {
		t.Errorf("server received %d emails, want %d", got, n)
	}
	if got := srv.ln.accepted(); got != 1 {
		t.Errorf("server accepted %d connections, want 1", got)
	}
}

func TestSendReplyCodes(t *testing.T) {
	tests := []struct {
		name          string
		to            string
		wantCode      int
		wantPermanent bool
	}{
		{"451 to RCPT", rcptBusy, 451, false},
		{"550 to RCPT", rcptGone, 550, true},
		{"451 after DATA", rcptDataBusy, 451, false},
		{"554 after DATA", rcptDataGone, 554, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, email.TLSNone)
			s := newSender(t, srv.port, email.TLSNone, nil)

			err := s.Send(t.Context(), message("n-1", tt.to))
			if err == nil {
				t.Fatal("Send succeeded, want an error")
			}
			if got := retry.IsPermanent(err); got != tt.wantPermanent {
				t.Errorf("IsPermanent = %v, want %v (err: %v)", got, tt.wantPermanent, err)
			}
			var se *mail.SendError
			if !errors.As(err, &se) || se.ErrorCode() != tt.wantCode {
				t.Errorf("reply code: err %v does not carry %d", err, tt.wantCode)
			}
			if !strings.Contains(err.Error(), "send email n-1") {
				t.Errorf("error %q does not name the notification", err)
			}

			// The server answered, so the connection is still good for the
			// next email.
			if err := s.Send(t.Context(), message("n-2", rcptOK)); err != nil {
				t.Fatalf("next Send: %v", err)
			}
			if got := srv.ln.accepted(); got != 1 {
				t.Errorf("server accepted %d connections, want 1", got)
			}
		})
	}
}

func TestSendConnectionLost(t *testing.T) {
	tests := []struct {
		name string
		// lose loses the connection and returns the error Send reported
		// while that happened, if any.
		lose          func(t *testing.T, srv *smtpServer, s *email.Sender) error
		wantFirstFail bool
	}{
		{
			name: "server hangs up mid-transaction",
			lose: func(t *testing.T, _ *smtpServer, s *email.Sender) error {
				return s.Send(t.Context(), message("n-1", rcptDrop))
			},
			wantFirstFail: true,
		},
		{
			name: "server closes the idle connection",
			lose: func(t *testing.T, srv *smtpServer, s *email.Sender) error {
				if err := s.Send(t.Context(), message("n-1", rcptOK)); err != nil {
					t.Fatalf("first Send: %v", err)
				}
				srv.ln.closeAll()
				return nil
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, email.TLSNone)
			s := newSender(t, srv.port, email.TLSNone, nil)

			err := tt.lose(t, srv, s)
			if tt.wantFirstFail {
				if err == nil {
					t.Fatal("Send succeeded on a lost connection")
				}
				if retry.IsPermanent(err) {
					t.Errorf("lost connection is permanent: %v", err)
				}
			}

			if err := s.Send(t.Context(), message("n-2", rcptOK)); err != nil {
				t.Fatalf("Send after the connection was lost: %v", err)
			}
			if got := srv.ln.accepted(); got != 2 {
				t.Errorf("server accepted %d connections, want 2", got)
			}
		})
	}
}

func TestSendTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	tests := []struct {
		name string
		// start returns the port of a server that will not answer a send
		// to recipient to.
		start func(t *testing.T) (port int, to string)
	}{
		{
			name: "no greeting",
			start: func(t *testing.T) (int, string) {
				return startSilentServer(t), rcptOK
			},
		},
		{
			name: "no reply to RCPT",
			start: func(t *testing.T) (int, string) {
				return startServer(t, email.TLSNone).port, rcptHang
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port, to := tt.start(t)
			s := newSender(t, port, email.TLSNone, func(c *email.Config) { c.Timeout = timeout })

			start := time.Now()
			err := s.Send(t.Context(), message("n-1", to))
			took := time.Since(start)
			if err == nil {
				t.Fatal("Send succeeded against a silent server")
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want one wrapping context.DeadlineExceeded", err)
			}
			if retry.IsPermanent(err) {
				t.Errorf("timeout is permanent: %v", err)
			}
			if took < timeout || took > timeout+5*time.Second {
				t.Errorf("Send took %s, want about %s", took, timeout)
			}
		})
	}
}

func TestSendRecoversAfterTimeout(t *testing.T) {
	srv := startServer(t, email.TLSNone)
	s := newSender(t, srv.port, email.TLSNone, func(c *email.Config) { c.Timeout = 300 * time.Millisecond })

	if err := s.Send(t.Context(), message("n-1", rcptHang)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send = %v, want a timeout", err)
	}
	if err := s.Send(t.Context(), message("n-2", rcptOK)); err != nil {
		t.Fatalf("Send after a timeout: %v", err)
	}
	if got := srv.ln.accepted(); got != 2 {
		t.Errorf("server accepted %d connections, want 2", got)
	}
}

func TestSendCancelled(t *testing.T) {
	srv := startServer(t, email.TLSNone)
	s := newSender(t, srv.port, email.TLSNone, func(c *email.Config) { c.Timeout = time.Minute })

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		select {
		case <-srv.parked:
			cancel()
		case <-ctx.Done():
		}
	}()

	err := s.Send(ctx, message("n-1", rcptHang))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Send = %v, want one wrapping context.Canceled", err)
	}
	if retry.IsPermanent(err) {
		t.Errorf("cancellation is permanent: %v", err)
	}
}

func TestSendTLS(t *testing.T) {
	tests := []struct {
		name       string
		server     email.TLSPolicy
		sender     email.TLSPolicy
		edit       func(*email.Config)
		wantErr    string // substring of the error, empty for success
		wantAccept int
	}{
		{name: "none against plain", server: email.TLSNone, sender: email.TLSNone},
		{name: "starttls", server: email.TLSStartTLS, sender: email.TLSStartTLS},
		{name: "implicit tls", server: email.TLSImplicit, sender: email.TLSImplicit},
		{
			name:    "starttls required but not offered",
			server:  email.TLSNone,
			sender:  email.TLSStartTLS,
			wantErr: "STARTTLS",
		},
		{
			name:    "untrusted certificate",
			server:  email.TLSStartTLS,
			sender:  email.TLSStartTLS,
			edit:    func(c *email.Config) { c.InsecureSkipVerify = false },
			wantErr: "certificate",
		},
		{
			name:    "auth against a server without AUTH",
			server:  email.TLSStartTLS,
			sender:  email.TLSStartTLS,
			edit:    func(c *email.Config) { c.Username, c.Password = "relay", "secret" },
			wantErr: "AUTH",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, tt.server)
			s := newSender(t, srv.port, tt.sender, tt.edit)

			err := s.Send(t.Context(), message("n-1", rcptOK))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Send: %v", err)
				}
				if got := len(srv.messages()); got != 1 {
					t.Errorf("server received %d emails, want 1", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Send = %v, want an error mentioning %q", err, tt.wantErr)
			}
			if !errors.Is(err, email.ErrConnect) {
				t.Errorf("err = %v, want one wrapping ErrConnect", err)
			}
			if retry.IsPermanent(err) {
				t.Errorf("connection failure is permanent: %v", err)
			}
		})
	}
}

func TestSendInvalidMessage(t *testing.T) {
	tests := []struct {
		name string
		msg  email.Message
	}{
		{"no id", email.Message{To: []string{rcptOK}, Text: "hi"}},
		{"no recipients", email.Message{ID: "n-1", Text: "hi"}},
		{"bad address", email.Message{ID: "n-1", To: []string{rcptOK, "not an address"}, Text: "hi"}},
		{"no body", email.Message{ID: "n-1", To: []string{rcptOK}, Subject: "hi"}},
	}
	srv := startServer(t, email.TLSNone)
	s := newSender(t, srv.port, email.TLSNone, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Send(t.Context(), tt.msg)
			if !errors.Is(err, email.ErrInvalidMessage) {
				t.Errorf("Send = %v, want one wrapping ErrInvalidMessage", err)
			}
			if !retry.IsPermanent(err) {
				t.Errorf("invalid message is not permanent: %v", err)
			}
		})
	}
	if got := srv.ln.accepted(); got != 0 {
		t.Errorf("server accepted %d connections for invalid messages, want 0", got)
	}
}

func TestSendAfterClose(t *testing.T) {
	srv := startServer(t, email.TLSNone)
	s := newSender(t, srv.port, email.TLSNone, nil)

	if err := s.Send(t.Context(), message("n-1", rcptOK)); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Send(t.Context(), message("n-2", rcptOK)); !errors.Is(err, email.ErrClosed) {
		t.Errorf("Send after Close = %v, want ErrClosed", err)
	}
}

func TestParseTLSPolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    email.TLSPolicy
		wantErr bool
	}{
		{in: "none", want: email.TLSNone},
		{in: "starttls", want: email.TLSStartTLS},
		{in: "tls", want: email.TLSImplicit},
		{in: " STARTTLS ", want: email.TLSStartTLS},
		{in: "", wantErr: true},
		{in: "ssl", wantErr: true},
		{in: "opportunistic", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := email.ParseTLSPolicy(tt.in)
			if tt.wantErr {
				if !errors.Is(err, email.ErrInvalidConfig) {
					t.Fatalf("ParseTLSPolicy(%q) error = %v, want ErrInvalidConfig", tt.in, err)
				}
				for _, accepted := range []string{"none", "starttls", "tls"} {
					if !strings.Contains(err.Error(), `"`+accepted+`"`) {
						t.Errorf("error %q does not list %q", err, accepted)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTLSPolicy(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseTLSPolicy(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNewSenderValidation(t *testing.T) {
	valid := email.Config{Host: "smtp.example.com", Port: 587, From: fromAddr}
	tests := []struct {
		name      string
		edit      func(*email.Config)
		wantField string // empty when the config is valid
	}{
		{name: "valid", edit: func(*email.Config) {}},
		{name: "named from", edit: func(c *email.Config) { c.From = "Relay <noreply@example.com>" }},
		{name: "implicit tls with auth", edit: func(c *email.Config) { c.TLS, c.Username = email.TLSImplicit, "relay" }},
		{name: "no host", edit: func(c *email.Config) { c.Host = "" }, wantField: "host"},
		{name: "host with port", edit: func(c *email.Config) { c.Host = "smtp.example.com:25" }, wantField: "host"},
		{name: "port zero", edit: func(c *email.Config) { c.Port = 0 }, wantField: "port"},
		{name: "port too high", edit: func(c *email.Config) { c.Port = 65536 }, wantField: "port"},
		{name: "no from", edit: func(c *email.Config) { c.From = "" }, wantField: "from"},
		{name: "bad from", edit: func(c *email.Config) { c.From = "relay at example" }, wantField: "from"},
		{name: "unknown tls", edit: func(c *email.Config) { c.TLS = "ssl" }, wantField: "tls"},
		{name: "auth in clear", edit: func(c *email.Config) { c.TLS, c.Username = email.TLSNone, "relay" }, wantField: "username"},
		{name: "negative timeout", edit: func(c *email.Config) { c.Timeout = -time.Second }, wantField: "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.edit(&cfg)
			s, err := email.NewSender(cfg)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("NewSender: %v", err)
				}
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				return
			}
			if !errors.Is(err, email.ErrInvalidConfig) {
				t.Fatalf("NewSender error = %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("error %q does not name %q", err, tt.wantField)
			}
		})
	}
}

func TestMessageID(t *testing.T) {
	tests := []struct {
		name, id, from, want string
	}{
		{"uuid", "3f2b9c1e-8d4a-4c7e-9a61-0b5f2e7d1c43", "noreply@example.com", "<3f2b9c1e-8d4a-4c7e-9a61-0b5f2e7d1c43@example.com>"},
		{"display name", "n-1", "Relay <noreply@mail.example.org>", "<n-1@mail.example.org>"},
		{"inner dots kept", "order.42.a", "noreply@example.com", "<order.42.a@example.com>"},
		{"outer and double dots escaped", ".a..b.", "noreply@example.com", "<=2Ea.=2Eb=2E@example.com>"},
		{"specials escaped", "a b<c>@d\"e", "noreply@example.com", "<a=20b=3Cc=3E=40d=22e@example.com>"},
		{"equals escaped", "a=20", "noreply@example.com", "<a=3D20@example.com>"},
		{"non-ascii escaped", "é", "noreply@example.com", "<=C3=A9@example.com>"},
		{"no usable from", "n-1", "nobody", "<n-1@relay>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := email.MessageID(tt.id, tt.from); got != tt.want {
				t.Errorf("MessageID(%q, %q) = %q, want %q", tt.id, tt.from, got, tt.want)
			}
		})
	}
}
