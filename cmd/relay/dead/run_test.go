package dead

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

func TestParse(t *testing.T) {
	tests := []struct {
		args    []string
		want    options
		wantErr string
	}{
		{args: nil, wantErr: "usage: relay dead list|show|replay|purge"},
		{args: []string{"bury"}, wantErr: `unknown verb "bury": want list, show, replay, purge or job`},
		{args: []string{"list"}, want: options{verb: "list", limit: DefaultLimit}},
		{args: []string{"list", "--limit", "0"}, want: options{verb: "list"}},
		{args: []string{"list", "--limit", "-1"}, wantErr: "--limit -1: want 0 or more (0: all)"},
		{args: []string{"list", "--limit", "abc"}, wantErr: `invalid value "abc" for flag -limit`},
		{args: []string{"list", "extra"}, wantErr: `unexpected argument "extra"`},
		{args: []string{"list", "--all"}, wantErr: "flag provided but not defined: -all"},
		{args: []string{"list", "--recipient", "typo@exmaple.com"}, want: options{verb: "list", recipient: "typo@exmaple.com", limit: DefaultLimit}},
		{args: []string{"list", "--id", "n1", "--recipient", "full@example.com", "--json"},
			want: options{verb: "list", id: "n1", recipient: "full@example.com", json: true, limit: DefaultLimit}},
		{args: []string{"show", "n1"}, want: options{verb: "show", id: "n1"}},
		{args: []string{"show", "n1", "--json", "--source", "email-queue"}, want: options{verb: "show", id: "n1", json: true, source: "email-queue"}},
		{args: []string{"show", "--json", "n1"}, want: options{verb: "show", id: "n1", json: true}},
		{args: []string{"show", "n1", "--recipient", "typo@exmaple.com"}, want: options{verb: "show", id: "n1", recipient: "typo@exmaple.com"}},
		{args: []string{"show", "--recipient", "typo@exmaple.com"}, wantErr: "relay dead show needs an id"},
		{args: []string{"show"}, wantErr: "relay dead show needs an id"},
		{args: []string{"show", "--json"}, wantErr: "relay dead show needs an id"},
		{args: []string{"show", "n1", "n2"}, wantErr: `unexpected argument "n2"`},
		{args: []string{"show", "--id", "n1"}, wantErr: "flag provided but not defined: -id"},
		{args: []string{"replay"}, wantErr: "relay dead replay needs a filter (--id, --source, --recipient, --channel, --reason, --endpoint, --since, --until, --error or --tenant) or --all"},
		{args: []string{"replay", "--id", "n1"}, want: options{verb: "replay", id: "n1"}},
		{args: []string{"replay", "--tenant", "acme"}, want: options{verb: "replay", tenant: "acme"}},
		{args: []string{"purge", "--tenant", "default", "--reason", "permanent", "--yes"}, want: options{verb: "purge", tenant: "default", reason: "permanent", yes: true}},
		{args: []string{"list", "--tenant", "acme"}, want: options{verb: "list", tenant: "acme", limit: DefaultLimit}},
		{args: []string{"purge", "--all", "--tenant", "acme", "--yes"}, wantErr: "relay dead purge: --all selects every parked message"},
		{args: []string{"show", "n1", "--tenant", "acme"}, wantErr: "flag provided but not defined: -tenant"},
		{args: []string{"replay", "--all"}, want: options{verb: "replay", all: true}},
		{args: []string{"replay", "--all", "--source", "email-queue"},
			wantErr: "relay dead replay: --all selects every parked message: leave out --id, --source, --recipient, --channel, --reason, --endpoint, --since, --until, --error or --tenant, or --all"},
		{args: []string{"replay", "--all", "--id", "n1"}, wantErr: "relay dead replay: --all selects every parked message"},
		{args: []string{"replay", "--id", "n1", "--recipient", "typo@exmaple.com"}, want: options{verb: "replay", id: "n1", recipient: "typo@exmaple.com"}},
		{args: []string{"replay", "--recipient", "typo@exmaple.com"}, want: options{verb: "replay", recipient: "typo@exmaple.com"}},
		{args: []string{"replay", "--all", "--recipient", "typo@exmaple.com"}, wantErr: "relay dead replay: --all selects every parked message"},
		{args: []string{"purge", "--yes"}, wantErr: "relay dead purge needs a filter"},
		{args: []string{"purge", "--source", "email-queue", "--all", "--yes"}, wantErr: "relay dead purge: --all selects every parked message"},
		{args: []string{"purge", "--source", "email-queue", "--yes"}, want: options{verb: "purge", source: "email-queue", yes: true}},
		{args: []string{"purge", "--yes", "--id", "n1", "--source", "email-queue"},
			want: options{verb: "purge", id: "n1", source: "email-queue", yes: true}},
		{args: []string{"purge", "--id", "n1", "--recipient", "full@example.com", "--yes"},
			want: options{verb: "purge", id: "n1", recipient: "full@example.com", yes: true}},
		{args: []string{"purge", "--recipient", "full@example.com", "--all", "--yes"}, wantErr: "relay dead purge: --all selects every parked message"},
		{args: []string{"replay", "--channel", "email", "--reason", "permanent", "--since", "2026-03-14T09:00:00Z", "--until", "2026-03-15T00:00:00Z"},
			want: options{verb: "replay", channel: "email", reason: "permanent", since: "2026-03-14T09:00:00Z", until: "2026-03-15T00:00:00Z"}},
		{args: []string{"replay", "--endpoint", "ep_3kq7ymzd5vbxw2n4c6f7h2j4la", "--error", "timeout", "--job"},
			want: options{verb: "replay", endpoint: "ep_3kq7ymzd5vbxw2n4c6f7h2j4la", errText: "timeout", job: true}},
		{args: []string{"purge", "--reason", "expired", "--dry-run"}, want: options{verb: "purge", reason: "expired", dryRun: true}},
		{args: []string{"purge", "--reason", "expired", "--dry-run", "--job"}, wantErr: "--dry-run counts and --job acts: give one"},
		{args: []string{"replay", "--all", "--channel", "email"}, wantErr: "relay dead replay: --all selects every parked message"},
		{args: []string{"list", "--channel", "webhook", "--error", "410"}, want: options{verb: "list", channel: "webhook", errText: "410", limit: DefaultLimit}},
		{args: []string{"list", "--dry-run"}, wantErr: "flag provided but not defined: -dry-run"},
		{args: []string{"job", "job_1"}, want: options{verb: "job", id: "job_1"}},
		{args: []string{"job", "--json", "job_1"}, want: options{verb: "job", id: "job_1", json: true}},
		{args: []string{"job"}, wantErr: "relay dead job needs an id"},
		{args: []string{"job", "job_1", "--cancel"}, want: options{verb: "job", id: "job_1", cancel: true}},
		{args: []string{"job", "job_1", "--recipient", "a@example.com"}, wantErr: "flag provided but not defined: -recipient"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parse(tt.args, noEnv, &bytes.Buffer{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parse(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(options{}), cmpopts.IgnoreFields(options{}, "api")); diff != "" {
				t.Errorf("parse(%q) (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

// TestUsageNeedsNoBroker: a usage error is answered before the command
// reads its environment or dials.
func TestUsageNeedsNoBroker(t *testing.T) {
	for _, args := range [][]string{{"replay", "--all", "--source", "email-queue"}, {"show"}, {"list", "--limit", "-1"},
		{"purge", "--all", "--recipient", "typo@exmaple.com"}} {
		err := Run(context.Background(), args, func(string) string { return "amqp://nowhere.invalid" }, strings.NewReader(""), &bytes.Buffer{})
		if err == nil || strings.Contains(err.Error(), "nowhere") {
			t.Errorf("Run(%q) = %v, want a usage error", args, err)
		}
	}
}

func TestShowHelp(t *testing.T) {
	var out bytes.Buffer
	if _, err := parse([]string{"show", "-h"}, noEnv, &out); err == nil {
		t.Fatal("show -h: no flag.ErrHelp")
	}
	for _, want := range []string{"usage: relay dead show ID", "-json", "-source", "-recipient address", "one per recipient"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("show -h lacks %q:\n%s", want, out.String())
		}
	}
}

// noEnv is an empty environment.
func noEnv(string) string { return "" }

// views are parked copies as GET /v1/dead-letters answers them.
func views(list ...retry.DeadLetter) []notification.DeadLetter {
	out := make([]notification.DeadLetter, len(list))
	for i, p := range list {
		out[i] = notification.NewDeadLetter(p)
	}
	return out
}

// details are parked copies as GET /v1/dead-letters/{id} answers them.
func details(list ...retry.DeadLetter) []notification.DeadLetterDetail {
	out := make([]notification.DeadLetterDetail, len(list))
	for i, p := range list {
		out[i] = notification.NewDeadLetterDetail(p)
	}
	return out
}

// parked is what retry.DeadLetters reads back for each delivery.
func parked(ds ...amqp.Delivery) []retry.DeadLetter {
	out := make([]retry.DeadLetter, len(ds))
	copies := retry.Topology{CopyHeader: notification.HeaderRecipient}
	for i, d := range ds {
		out[i] = retry.DeadLetter{ID: d.MessageId, Source: d.Headers[retry.HeaderDeadSource].(string),
			Reason: d.Headers[retry.HeaderDeadReason].(string), Headers: d.Headers, Body: d.Body,
			ContentType: d.ContentType, ContentEncoding: d.ContentEncoding, Copy: copies.Copy(d.Headers)}
	}
	return out
}

func TestPrintShow(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	jsonCopy := retry.DeadLetter{ID: "n1", Source: "p.email-queue", Reason: retry.ReasonMaxRetries, Retries: 4, Replays: 1,
		PriorRetries: 5, PriorError: "503", FirstFailedAt: at, ParkedAt: at.Add(time.Hour), LastError: "timeout\nafter 10s",
		ContentType: "application/json", Body: []byte(`{"to":"ada","note":"<b>"}`),
		Headers: amqp.Table{retry.HeaderDeadSource: "p.email-queue", retry.HeaderReplays: int32(1), "tenant": []byte("acme")}}
	binaryCopy := retry.DeadLetter{ID: "n1", Source: "p.webhook-queue", Reason: retry.ReasonPermanent,
		ContentType: "application/octet-stream", Body: bytes.Repeat([]byte{0xff}, 60)}
	emptyCopy := retry.DeadLetter{ID: "n2", Source: "p.sms-queue", Reason: retry.ReasonPermanent}

	var out bytes.Buffer
	if err := printShow(&out, details(jsonCopy, binaryCopy, emptyCopy), false); err != nil {
		t.Fatal(err)
	}
	want := `id             n1
source         p.email-queue
reason         max-retries
retries        4
replays        1 (5 retries in the rounds before)
first failure  2026-01-02 03:04:05
parked         2026-01-02 04:04:05
last error     timeout
               after 10s
prior error    503
content type   application/json
headers
  tenant: acme
  x-dead-source: p.email-queue
  x-replays: 1
body (JSON, 25 bytes)
  {
    "to": "ada",
    "note": "<b>"
  }

id             n1
source         p.webhook-queue
reason         permanent
retries        0
first failure  -
parked         -
content type   application/octet-stream
headers        (none)
body (base64, 60 bytes)
  ////////////////////////////////////////////////////////////////////////////
  ////

id             n2
source         p.sms-queue
reason         permanent
retries        0
first failure  -
parked         -
headers        (none)
body (empty)
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("show (-want +got):\n%s", diff)
	}

	// --json prints the objects the API answers, one a line.
	out.Reset()
	if err := printShow(&out, details(jsonCopy, binaryCopy), true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("show --json printed %d lines:\n%s", len(lines), out.String())
	}
	for i, p := range []retry.DeadLetter{jsonCopy, binaryCopy} {
		var got, want map[string]any
		wantJSON, _ := json.Marshal(p.Detail())
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(wantJSON, &want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("line %d (-want +got):\n%s", i, diff)
		}
	}
	if !strings.Contains(lines[0], `"body":{"to":"ada"`) || !strings.Contains(lines[1], `"body_base64":"////`) {
		t.Errorf("show --json bodies:\n%s", out.String())
	}
}

func TestPrintList(t *testing.T) {
	list := parked(amqp.Delivery{MessageId: "n1", Headers: amqp.Table{retry.HeaderDeadSource: "p.email-queue", retry.HeaderDeadReason: "permanent"}})
	list[0].Replays, list[0].LastError = 2, "550 mailbox\nunavailable"
	var out bytes.Buffer
	if err := printList(&out, views(list...), false); err != nil {
		t.Fatal(err)
	}
	want := "ID  SOURCE         REASON     RETRIES  REPLAYS  FIRST FAILURE  PARKED  LAST ERROR\n" +
		"n1  p.email-queue  permanent  0        2        -              -       550 mailbox unavailable\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	// A copy for one recipient (an email's): a RECIPIENT column.
	list = append(list, parked(amqp.Delivery{MessageId: "n2", Headers: amqp.Table{retry.HeaderDeadSource: "p.email-queue",
		retry.HeaderDeadReason: "permanent", notification.HeaderRecipient: "ada@example.com"}})...)
	out.Reset()
	if err := printList(&out, views(list...), false); err != nil {
		t.Fatal(err)
	}
	want = "ID  RECIPIENT        SOURCE         REASON     RETRIES  REPLAYS  FIRST FAILURE  PARKED  LAST ERROR\n" +
		"n1  -                p.email-queue  permanent  0        2        -              -       550 mailbox unavailable\n" +
		"n2  ada@example.com  p.email-queue  permanent  0        0        -              -       -\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("list with a recipient (-want +got):\n%s", diff)
	}
	out.Reset()
	if err := printList(&out, nil, false); err != nil || !strings.Contains(out.String(), "empty") {
		t.Errorf("empty list = %q, %v", out.String(), err)
	}
}

func TestOneLine(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"", 10, "-"},
		{"a\n  b", 10, "a b"},
		{"abcdefghijk", 5, "abcd…"},
		{"ééééééé", 4, "ééé…"},
	}
	for _, tt := range tests {
		if got := oneLine(tt.s, tt.n); got != tt.want {
			t.Errorf("oneLine(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

// TestRecipientFlagEverywhere: every verb takes --recipient, and its help
// says what it selects; and --api and --token, the API it calls.
func TestRecipientFlagEverywhere(t *testing.T) {
	for _, verb := range []string{"list", "show", "replay", "purge"} {
		var out bytes.Buffer
		if _, err := parse([]string{verb, "-h"}, noEnv, &out); err == nil {
			t.Fatalf("%s -h: no flag.ErrHelp", verb)
		}
		if !strings.Contains(out.String(), "-recipient address\n") || !strings.Contains(out.String(), "copies for this recipient") {
			t.Errorf("relay dead %s -h does not offer --recipient:\n%s", verb, out.String())
		}
		if !strings.Contains(out.String(), "-api url") || !strings.Contains(out.String(), "-token token") {
			t.Errorf("relay dead %s -h does not offer --api and --token:\n%s", verb, out.String())
		}
	}
}

// TestPrintEscapes: what a publisher wrote into a parked message's
// headers (x-last-error, x-recipient, any other) reaches the terminal
// escaped, in the list and in show, as text or as JSON.
func TestPrintEscapes(t *testing.T) {
	hostile := "\x1b]0;owned\x07\x1b[2K\rdelivered \u009b\u202eok"
	list := parked(amqp.Delivery{MessageId: "n1\x1b[8m", Headers: amqp.Table{retry.HeaderDeadSource: "p.email-queue",
		retry.HeaderDeadReason: "permanent", retry.HeaderLastError: hostile, notification.HeaderRecipient: "ada@example.com" + hostile, "tenant": hostile}})
	list[0].LastError, list[0].Copy = hostile, "ada@example.com"+hostile
	for _, asJSON := range []bool{false, true} {
		for name, print := range map[string]func(io.Writer, []retry.DeadLetter, bool) error{
			"list": func(w io.Writer, l []retry.DeadLetter, j bool) error { return printList(w, views(l...), j) },
			"show": func(w io.Writer, l []retry.DeadLetter, j bool) error { return printShow(w, details(l...), j) },
		} {
			var out bytes.Buffer
			if err := print(&out, list, asJSON); err != nil {
				t.Fatal(err)
			}
			if strings.ContainsAny(out.String(), "\x1b\x07\r\u009b\u202e") {
				t.Errorf("%s (JSON %t) printed a control character:\n%q", name, asJSON, out.String())
			}
			if !asJSON && !strings.Contains(out.String(), `\u001b]0;owned\u0007`) {
				t.Errorf("%s does not show the escaped header:\n%s", name, out.String())
			}
		}
	}
}

func TestReplayHelp(t *testing.T) {
	for _, verb := range []string{"replay", "purge"} {
		var out bytes.Buffer
		if _, err := parse([]string{verb, "-h"}, noEnv, &out); err == nil {
			t.Fatalf("%s -h: no flag.ErrHelp", verb)
		}
		for _, want := range []string{"-channel channel", "-reason reason", "max-retries, permanent", "-endpoint id", "-since time", "RFC 3339",
			"-until time", "-error text", "-dry-run", "-job", "follow its progress on stderr"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s -h lacks %q:\n%s", verb, want, out.String())
			}
		}
	}
}
