package flaky

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// MaxMessages is how many accepted messages per channel Stats keeps, and
// the largest limit GET /messages honours.
const MaxMessages = 500

// Stats records what both downstreams were sent and how they answered. It
// is safe for concurrent use.
type Stats struct {
	mu       sync.Mutex
	email    ledger
	webhook  ledger
	emails   []EmailMessage
	webhooks []WebhookMessage
	// paths counts the webhook answers by request path.
	paths map[string]*PathStats
}

// maxPaths bounds the webhook paths Stats counts apart; the answers to
// any other path are counted under otherPaths.
const (
	maxPaths   = 100
	otherPaths = "(other)"
)

// PathStats counts the answers to webhooks posted to one path.
type PathStats struct {
	// Answered counts the webhooks answered, or given up by the sender.
	Answered int `json:"answered"`
	// ByCode counts them by status: 2xx for delivered, 499 for a sender
	// that gave up before the answer.
	ByCode map[int]int `json:"by_code"`
}

// ledger holds the counters of one channel.
type ledger struct {
	scenario     string
	received     int
	accepted     int
	duplicates   int
	failedByCode map[int]int
	attempts     map[string][]time.Time
	delivered    map[string]bool
}

func newLedger(scenario string) ledger {
	return ledger{
		scenario:     scenario,
		failedByCode: map[int]int{},
		attempts:     map[string][]time.Time{},
		delivered:    map[string]bool{},
	}
}

// NewStats returns empty Stats for the given scenario names.
func NewStats(emailScenario, webhookScenario string) *Stats {
	return &Stats{email: newLedger(emailScenario), webhook: newLedger(webhookScenario)}
}

func (s *Stats) ledger(ch Channel) *ledger {
	if ch == Email {
		return &s.email
	}
	return &s.webhook
}

// Attempt counts an attempt on ch that arrived at at and returns its
// number for id, counting from 1. An empty id (an attempt turned away
// before its id was known) is counted as received only, and its number is 0.
func (s *Stats) Attempt(ch Channel, id string, at time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.ledger(ch)
	l.received++
	if id == "" {
		return 0
	}
	l.attempts[id] = append(l.attempts[id], at.UTC())
	return len(l.attempts[id])
}

// Answered counts a webhook to path answered with code (499 when its
// sender gave up first): the per-path view that tells one webhook
// endpoint from another.
func (s *Stats) Answered(path string, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paths == nil {
		s.paths = map[string]*PathStats{}
	}
	p := s.paths[path]
	if p == nil {
		if len(s.paths) >= maxPaths {
			path = otherPaths
		}
		if p = s.paths[path]; p == nil {
			p = &PathStats{ByCode: map[int]int{}}
			s.paths[path] = p
		}
	}
	p.Answered++
	p.ByCode[code]++
}

// Fail counts an attempt on ch answered with the failure code.
func (s *Stats) Fail(ch Channel, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger(ch).failedByCode[code]++
}

// AcceptEmail records an accepted email. It reports whether a message with
// the same id had been accepted before; a duplicate is counted but not kept.
func (s *Stats) AcceptEmail(m EmailMessage) (duplicate bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.email.accept(emailKey(m.ID, m.To)) {
		return true
	}
	s.emails = keepLast(append(s.emails, m))
	return false
}

// emailKey identifies one email delivery: relay sends a notification's
// email once per recipient, all with the notification's id, so the id and
// the envelope's recipients together tell one delivery from another.
func emailKey(id string, to []string) string {
	if id == "" || len(to) == 0 {
		return id
	}
	return id + " to " + strings.Join(slices.Sorted(slices.Values(to)), ",")
}

// AcceptWebhook records an accepted webhook. It reports whether a webhook
// with the same id had been accepted before; a duplicate is counted but
// not kept.
func (s *Stats) AcceptWebhook(m WebhookMessage) (duplicate bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.webhook.accept(m.ID) {
		return true
	}
	s.webhooks = keepLast(append(s.webhooks, m))
	return false
}

func (l *ledger) accept(id string) (duplicate bool) {
	if l.delivered[id] {
		l.duplicates++
		return true
	}
	l.delivered[id] = true
	l.accepted++
	return false
}

func keepLast[T any](s []T) []T {
	if n := len(s) - MaxMessages; n > 0 {
		return slices.Delete(s, 0, n)
	}
	return s
}

// StatsReport is the body of GET /stats.
type StatsReport struct {
	Email   ChannelStats `json:"email"`
	Webhook ChannelStats `json:"webhook"`
	// WebhookPaths counts the webhook answers by request path (the first
	// 100 paths; the rest under "(other)").
	WebhookPaths map[string]PathStats `json:"webhook_paths"`
}

// ChannelStats are the counters of one channel.
type ChannelStats struct {
	// Scenario is the name of the scenario the channel plays.
	Scenario string `json:"scenario"`
	// Received counts every attempt, whatever its answer.
	Received int `json:"received"`
	// Accepted counts distinct ids delivered.
	Accepted int `json:"accepted"`
	// Duplicates counts deliveries of an id that had been delivered before.
	Duplicates int `json:"duplicates"`
	// FailedByCode counts failed attempts by the code they were answered
	// with.
	FailedByCode map[int]int `json:"failed_by_code"`
	// Attempts lists, per id, when each attempt arrived.
	Attempts map[string][]time.Time `json:"attempts"`
}

// Report returns a copy of the counters of both channels.
func (s *Stats) Report() StatsReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	paths := make(map[string]PathStats, len(s.paths))
	for k, p := range s.paths {
		paths[k] = PathStats{Answered: p.Answered, ByCode: maps.Clone(p.ByCode)}
	}
	return StatsReport{Email: s.email.report(), Webhook: s.webhook.report(), WebhookPaths: paths}
}

func (l *ledger) report() ChannelStats {
	attempts := make(map[string][]time.Time, len(l.attempts))
	for id, at := range l.attempts {
		attempts[id] = slices.Clone(at)
	}
	return ChannelStats{
		Scenario:     l.scenario,
		Received:     l.received,
		Accepted:     l.accepted,
		Duplicates:   l.duplicates,
		FailedByCode: maps.Clone(l.failedByCode),
		Attempts:     attempts,
	}
}

// EmailMessage is an accepted email as GET /messages lists it.
type EmailMessage struct {
	ID   string   `json:"id"`
	From string   `json:"from"`
	To   []string `json:"to"`
	// HeaderTo is the message's To: header: whom its readers see it was
	// sent to.
	HeaderTo   string    `json:"header_to"`
	Subject    string    `json:"subject"`
	ReceivedAt time.Time `json:"received_at"`
}

// WebhookMessage is an accepted webhook as GET /messages lists it.
type WebhookMessage struct {
	ID   string `json:"id"`
	Path string `json:"path"`
	// Body is the request body when it is JSON, otherwise the body as a
	// JSON string.
	Body       json.RawMessage `json:"body"`
	ReceivedAt time.Time       `json:"received_at"`
}

// MessagesReport is the body of GET /messages.
type MessagesReport struct {
	Email   []EmailMessage   `json:"email"`
	Webhook []WebhookMessage `json:"webhook"`
}

// Messages returns up to limit of the latest accepted messages of each
// channel, newest first.
func (s *Stats) Messages(limit int) MessagesReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return MessagesReport{Email: latest(s.emails, limit), Webhook: latest(s.webhooks, limit)}
}

func latest[T any](s []T, limit int) []T {
	out := slices.Clone(s[max(len(s)-limit, 0):])
	slices.Reverse(out)
	if out == nil {
		out = []T{}
	}
	return out
}
