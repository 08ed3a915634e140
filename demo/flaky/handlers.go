package flaky

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxWebhookBytes is the largest webhook body the receiver reads.
const maxWebhookBytes = 1 << 20

// defaultMessagesLimit is how many messages per channel GET /messages
// returns when no limit is given.
const defaultMessagesLimit = 50

// statusClientGone records a slow webhook whose sender hung up before the
// answer was due.
const statusClientGone = 499

// verifier checks a webhook's Standard Webhooks signature.
type verifier interface {
	Verify(h http.Header, body []byte, now time.Time) error
}

// deps is what the HTTP handlers share.
type deps struct {
	logger   *slog.Logger
	stats    *Stats
	scenario Scenario
	// verifier is nil when no secret is configured.
	verifier verifier
	// smsVerifier checks the SMS gateway's requests (PathSMS); nil when no
	// SMS secret is configured.
	smsVerifier verifier
	now         func() time.Time
	// ctx is done when the server shuts down.
	ctx context.Context
}

// handleWebhook receives a webhook at any path under /webhooks/ and
// answers as the webhook scenario decides, or as the per-endpoint scenario
// of its path does (see EndpointPaths). Webhooks to those paths are not
// verified: a webhook endpoint signs with a secret of its own, which the
// receiver does not know.
func handleWebhook(d deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		at := d.now()
		log := d.logger.With("channel", Webhook, "scenario", d.scenario.Name, "path", r.URL.Path)
		reject := func(id string, code int, reason string) {
			d.stats.Fail(Webhook, code)
			d.stats.Answered(r.URL.Path, code)
			log.Info("webhook failed", "message_id", id, "status", code, "reason", reason)
			writeJSON(w, code, map[string]string{"error": reason})
		}

		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBytes))
		if err != nil {
			d.stats.Attempt(Webhook, "", at)
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				reject("", http.StatusRequestEntityTooLarge, "body larger than 1 MiB")
				return
			}
			reject("", http.StatusBadRequest, "cannot read body: "+err.Error())
			return
		}
		id := r.Header.Get("webhook-id")
		switch {
		case isSMSPath(r.URL.Path):
			// The gateway's key is its own, and a request signed with it
			// says it is one for the gateway.
			if d.smsVerifier != nil {
				if reason := checkSMSRequest(d.smsVerifier, r.Header, body, at); reason != "" {
					d.stats.Attempt(Webhook, "", at)
					reject(id, http.StatusUnauthorized, reason)
					return
				}
			}
		case d.verifier != nil && endpointPath(r.URL.Path) == "":
			if err := d.verifier.Verify(r.Header, body, at); err != nil {
				d.stats.Attempt(Webhook, "", at)
				reject(id, http.StatusUnauthorized, "signature: "+err.Error())
				return
			}
		}
		if id == "" {
			d.stats.Attempt(Webhook, "", at)
			reject("", http.StatusBadRequest, "missing webhook-id header")
			return
		}

		attempt := d.stats.Attempt(Webhook, id, at)
		log = log.With("message_id", id, "attempt", attempt)
		o := d.scenario.Decide(id, attempt, r.URL.Path, at)
		// The answer is held back first, a failure's too (a hang).
		if err := wait(r.Context(), o.Delay); err != nil {
			if d.ctx.Err() != nil {
				d.stats.Fail(Webhook, http.StatusServiceUnavailable)
				d.stats.Answered(r.URL.Path, http.StatusServiceUnavailable)
				log.Info("webhook cut short by shutdown", "status", http.StatusServiceUnavailable)
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "shutting down"})
				return
			}
			d.stats.Fail(Webhook, statusClientGone)
			d.stats.Answered(r.URL.Path, statusClientGone)
			log.Info("webhook sender gave up", "status", statusClientGone, "delay", o.Delay.String())
			return
		}
		if !o.Accept {
			if o.RetryAfter > 0 {
				w.Header().Set("Retry-After", retryAfterSeconds(o.RetryAfter))
			}
			d.stats.Fail(Webhook, o.Code)
			d.stats.Answered(r.URL.Path, o.Code)
			log.Info("webhook failed", "status", o.Code, "reason", o.Reason)
			writeJSON(w, o.Code, map[string]string{"error": o.Reason})
			return
		}
		d.stats.Answered(r.URL.Path, o.Code)
		dup := d.stats.AcceptWebhook(WebhookMessage{ID: id, Path: r.URL.Path, Body: rawJSON(body), ReceivedAt: at.UTC()})
		log.Info("webhook accepted", "status", o.Code, "duplicate", dup, "delay", o.Delay.String())
		writeJSON(w, o.Code, map[string]any{"id": id, "duplicate": dup})
	}
}

// handleStats answers with the counters of both channels.
func handleStats(d deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, d.stats.Report())
	}
}

// handleMessages answers with the latest accepted messages, newest first;
// ?limit=N picks how many per channel (default 50, at most 500).
func handleMessages(d deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		limit := defaultMessagesLimit
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "limit: want a whole number of at least 1"})
				return
			}
			limit = min(n, MaxMessages)
		}
		writeJSON(w, http.StatusOK, d.stats.Messages(limit))
	}
}

// handleHealthz answers 200 while the process serves.
func handleHealthz() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// rawJSON returns body when it is JSON, otherwise body as a JSON string.
func rawJSON(body []byte) json.RawMessage {
	if json.Valid(body) {
		return json.RawMessage(append([]byte(nil), body...))
	}
	s, _ := json.Marshal(string(body))
	return s
}

// PathSMS is where the SMS gateway listens: every path that starts with
// it (/webhooks/sms, /webhooks/sms-fail) is the gateway's.
const PathSMS = "/webhooks/sms"

func isSMSPath(path string) bool { return strings.HasPrefix(path, PathSMS) }

// checkSMSRequest says why a request to the SMS gateway is refused, or
// returns "": it must verify with the gateway's key, and its signed body
// must say it is an SMS request ({"type": "sms", …}).
func checkSMSRequest(v verifier, h http.Header, body []byte, at time.Time) string {
	if err := v.Verify(h, body, at); err != nil {
		return "signature: " + err.Error()
	}
	var req struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(body, &req) != nil || req.Type != "sms" {
		return `not an SMS gateway request: the signed body's type is not "sms"`
	}
	return ""
}
