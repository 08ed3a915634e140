package flaky

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/smtp"
	"net/textproto"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	gomail "github.com/wneessen/go-mail"
)

type email struct {
	// headers are written as given, before a one-line body.
	headers []string
	to      []string
	auth    bool
}

// reply is the first refusal a send met, or 250 at data when accepted.
type reply struct {
	Stage string
	Code  int
}

func replyCode(t *testing.T, stage string, err error) reply {
	t.Helper()
	var te *textproto.Error
	if !errors.As(err, &te) {
		t.Fatalf("%s: %v, want an SMTP reply", stage, err)
	}
	return reply{Stage: stage, Code: te.Code}
}

// send delivers m over a fresh SMTP connection with net/smtp.
func send(t *testing.T, addr string, m email) reply {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	if err := c.Hello("sender.test"); err != nil {
		t.Fatalf("hello: %v", err)
	}
	if m.auth {
		host, _, _ := net.SplitHostPort(addr)
		if err := c.Auth(smtp.PlainAuth("", "anyone", "anything", host)); err != nil {
			t.Fatalf("auth: %v", err)
		}
	}
	if err := c.Mail("relay@example.com"); err != nil {
		t.Fatalf("mail: %v", err)
	}
	for _, to := range m.to {
		if err := c.Rcpt(to); err != nil {
			return replyCode(t, "rcpt", err)
		}
	}
	w, err := c.Data()
	if err != nil {
		t.Fatalf("data: %v", err)
	}
	for _, h := range m.headers {
		fmt.Fprintf(w, "%s\r\n", h)
	}
	fmt.Fprintf(w, "\r\nHello.\r\n")
	if err := w.Close(); err != nil {
		return replyCode(t, "data", err)
	}
	if err := c.Quit(); err != nil {
		t.Fatalf("quit: %v", err)
	}
	return reply{Stage: "data", Code: 250}
}

func TestSMTP(t *testing.T) {
	withID := func(id string) []string {
		return []string{"X-Notification-ID: " + id, "Subject: hello", "From: relay@example.com"}
	}
	tests := []struct {
		name   string
		cfg    func(*Config)
		emails []email
		want   []reply
		stats  ChannelStats
	}{
		{
			name: "accepted, with a duplicate, with or without auth",
			emails: []email{
				{headers: withID("n-1"), to: []string{"a@example.com"}},
				{headers: []string{"Message-ID: <n-2@relay.test>", "Subject: hi"}, to: []string{"b@example.com"}, auth: true},
				{headers: append(withID("n-1"), "Message-ID: <other@relay.test>"), to: []string{"a@example.com"}},
			},
			want: []reply{{"data", 250}, {"data", 250}, {"data", 250}},
			stats: ChannelStats{
				Scenario: Healthy, Received: 3, Accepted: 2, Duplicates: 1, FailedByCode: map[int]int{},
				Attempts: map[string][]time.Time{"n-1": make([]time.Time, 2), "n-2@relay.test": make([]time.Time, 1)},
			},
		},
		{
			name: "flaky answers 451 at data",
			cfg:  func(c *Config) { c.EmailScenario = Flaky; c.Rate = 1 },
			emails: []email{
				{headers: withID("n-1"), to: []string{"a@example.com"}},
				{headers: withID("n-1"), to: []string{"a@example.com"}},
			},
			want: []reply{{"data", 451}, {"data", 451}},
			stats: ChannelStats{
				Scenario: Flaky, Received: 2, FailedByCode: map[int]int{451: 2},
				Attempts: map[string][]time.Time{"n-1": make([]time.Time, 2)},
			},
		},
		{
			name: "outage answers 451",
			cfg:  func(c *Config) { c.EmailScenario = Outage; c.Outage = time.Hour },
			emails: []email{
				{headers: withID("n-1"), to: []string{"a@example.com"}},
			},
			want: []reply{{"data", 451}},
			stats: ChannelStats{
				Scenario: Outage, Received: 1, FailedByCode: map[int]int{451: 1},
				Attempts: map[string][]time.Time{"n-1": make([]time.Time, 1)},
			},
		},
		{
			name: "rate limited answers 421 then accepts",
			cfg:  func(c *Config) { c.EmailScenario = RateLimited; c.RateLimitAttempts = 1 },
			emails: []email{
				{headers: withID("n-1"), to: []string{"a@example.com"}},
				{headers: withID("n-1"), to: []string{"a@example.com"}},
			},
			want: []reply{{"data", 421}, {"data", 250}},
			stats: ChannelStats{
				Scenario: RateLimited, Received: 2, Accepted: 1, FailedByCode: map[int]int{421: 1},
				Attempts: map[string][]time.Time{"n-1": make([]time.Time, 2)},
			},
		},
		{
			name: "permanent refuses the recipient with 550",
			cfg:  func(c *Config) { c.EmailScenario = Permanent },
			emails: []email{
				{headers: withID("n-1"), to: []string{"will-fail@example.com"}},
				{headers: withID("n-2"), to: []string{"ok@example.com"}},
			},
			want: []reply{{"rcpt", 550}, {"data", 250}},
			stats: ChannelStats{
				Scenario: Permanent, Received: 2, Accepted: 1, FailedByCode: map[int]int{550: 1},
				Attempts: map[string][]time.Time{"n-2": make([]time.Time, 1)},
			},
		},
		{
			name: "a message without an id is refused",
			emails: []email{
				{headers: []string{"Subject: anonymous"}, to: []string{"a@example.com"}},
			},
			want: []reply{{"data", 554}},
			stats: ChannelStats{
				Scenario: Healthy, Received: 1, FailedByCode: map[int]int{554: 1}, Attempts: map[string][]time.Time{},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, testConfig(t, tt.cfg))
			var got []reply
			for _, m := range tt.emails {
				got = append(got, send(t, srv.SMTPAddr(), m))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("replies (-want +got):\n%s", diff)
			}
			var report StatsReport
			getJSON(t, "http://"+srv.HTTPAddr()+"/stats", &report)
			if diff := cmp.Diff(tt.stats, report.Email, ignoreAttemptTimes); diff != "" {
				t.Errorf("email stats (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSMTPWithGoMail(t *testing.T) {
	srv := startServer(t, testConfig(t, nil))
	host, portStr, err := net.SplitHostPort(srv.SMTPAddr())
	if err != nil {
		t.Fatalf("split %s: %v", srv.SMTPAddr(), err)
	}
	port, _ := strconv.Atoi(portStr)

	msg := gomail.NewMsg()
	if err := msg.From("relay@example.com"); err != nil {
		t.Fatalf("from: %v", err)
	}
	if err := msg.To("ada@example.com", "bob@example.com"); err != nil {
		t.Fatalf("to: %v", err)
	}
	msg.SetGenHeader("X-Notification-ID", "n-42")
	msg.Subject("Grüße")
	msg.SetBodyString(gomail.TypeTextPlain, "Hello.")

	client, err := gomail.NewClient(host,
		gomail.WithPort(port),
		gomail.WithTLSPolicy(gomail.NoTLS),
		gomail.WithSMTPAuth(gomail.SMTPAuthLogin),
		gomail.WithUsername("anyone"),
		gomail.WithPassword("anything"),
		gomail.WithTimeout(5*time.Second),
	)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	if err := client.DialAndSend(msg); err != nil {
		t.Fatalf("send: %v", err)
	}

	var got MessagesReport
	getJSON(t, "http://"+srv.HTTPAddr()+"/messages", &got)
	want := []EmailMessage{{
		ID:       "n-42",
		From:     "relay@example.com",
		To:       []string{"ada@example.com", "bob@example.com"},
		HeaderTo: "<ada@example.com>, <bob@example.com>",
		Subject:  "Grüße",
	}}
	if diff := cmp.Diff(want, got.Email, cmpopts.IgnoreFields(EmailMessage{}, "ReceivedAt")); diff != "" {
		t.Errorf("emails (-want +got):\n%s", diff)
	}
	if len(got.Email) == 1 && time.Since(got.Email[0].ReceivedAt) > time.Minute {
		t.Errorf("received_at = %s, want about now", got.Email[0].ReceivedAt)
	}
}

func TestSlowEmailEndsOnShutdown(t *testing.T) {
	cfg := testConfig(t, func(c *Config) { c.EmailScenario = Slow; c.Latency = time.Hour })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := Start(ctx, cfg, slog.New(slog.NewJSONHandler(t.Output(), nil)))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	codes := make(chan int, 1)
	go func() {
		err := smtp.SendMail(srv.SMTPAddr(), nil, "relay@example.com", []string{"a@example.com"},
			[]byte("X-Notification-ID: n-1\r\nSubject: slow\r\n\r\nHello.\r\n"))
		var te *textproto.Error
		if errors.As(err, &te) {
			codes <- te.Code
			return
		}
		codes <- 0
	}()
	waitFor(t, "the email to arrive", func() bool { return srv.Stats().Report().Email.Received == 1 })
	cancel()
	if err := srv.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
	if got := <-codes; got != 421 {
		t.Errorf("reply = %d, want 421", got)
	}
}
