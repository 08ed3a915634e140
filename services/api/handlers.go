package api

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/events"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/problem"
	"github.com/relay-demo/relay/internal/tracing"
	"github.com/relay-demo/relay/retry"
)

// AppID is the app-id property of every message the API publishes.
const AppID = "relay-api"

// MessageType is the type property of every message the API publishes.
const MessageType = "notification.v1"

// errInternal marks a publish that failed through a fault of the API
// itself, neither the client's nor the broker's: a 500.
var errInternal = errors.New("internal error")

// accepted is the body of a 202 answer.
type accepted struct {
	ID       string   `json:"id"`
	Channels []string `json:"channels"`
	// Copies are the messages it went out as: one per channel, or per
	// recipient for a channel that delivers to each on its own (email).
	Copies []notification.CopyRef `json:"copies"`
	// DueAt is, for a scheduled notification, when its copies reach
	// their queues.
	DueAt *time.Time `json:"due_at,omitempty"`
	// Rounded says why DueAt is later than the time asked for.
	Rounded string `json:"rounded,omitempty"`
}

// acceptedOf is the answer for n, published to channels.
func acceptedOf(set channel.Set, n *notification.Notification, channels []string) *accepted {
	a := &accepted{ID: n.ID, Channels: channels, Copies: copyRefs(set, n, channels)}
	if !n.DueAt.IsZero() {
		due := n.DueAt.UTC()
		a.DueAt = &due
	}
	return a
}

// copyRefs are the copies n makes on channels: one per channel, or one per
// recipient on a channel that delivers to each on its own (email). They
// are what the answer lists and what the rate limit counts.
func copyRefs(set channel.Set, n *notification.Notification, channels []string) []notification.CopyRef {
	out := make([]notification.CopyRef, 0, len(channels))
	for _, name := range channels {
		if c, err := set.Lookup(name); err == nil && c.PerRecipient() {
			for _, r := range c.RecipientsOf(n) {
				out = append(out, notification.CopyRef{Channel: name, Recipient: r})
			}
			continue
		}
		out = append(out, notification.CopyRef{Channel: name})
	}
	return out
}

// handleCreateNotification takes a notification, publishes one copy per
// channel (per recipient for email) and answers 202 only once the broker has confirmed every copy.
func handleCreateNotification(deps Deps, m *metrics) http.HandlerFunc {
	ingress := deps.Topology.Ingress()
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		start := time.Now()
		if p := checkContentType(r.Header.Get("Content-Type")); p != nil {
			return p
		}
		key, hasKey, p := idempotencyKey(r.Header)
		if p != nil {
			return p
		}
		if r.ContentLength > deps.MaxBody {
			return tooLarge(deps.MaxBody)
		}
		n, timing, err := deps.request.decodeTimed(http.MaxBytesReader(w, r.Body, deps.MaxBody))
		if err != nil {
			return asProblem(err)
		}
		if p := checkType(deps.Topology, n); p != nil {
			return p
		}
		sched, p := schedule(deps.Topology, timing, deps.Now())
		if p != nil {
			return p
		}
		n.DueAt = sched.due
		pub := deps.Publisher()
		if pub == nil {
			return unavailable("the API is not connected to the broker")
		}
		if hasKey {
			n.ID = idempotentID(identity(r.Context()), key)
		} else {
			n.ID = deps.NewID()
		}
		n.CreatedAt = deps.Now().UTC()
		n.Tenant = tenantOf(r.Context())
		channels := n.Channels()
		var claim *keyClaim
		if hasKey && deps.History != nil {
			var p *Problem
			claim, p = claimKey(r.Context(), deps, identity(r.Context()), key, n, timing)
			if p != nil {
				return p
			}
			if claim.done != nil {
				deps.Log.Info("notification repeated with its Idempotency-Key: answered, not published again", "id", claim.id)
				w.Header().Set("Idempotent-Replayed", "true")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusAccepted)
				_, _ = w.Write(claim.done)
				return nil
			}
		}
		if p := deps.chargeCopies(r, len(copyRefs(deps.Channels, n, channels))); p != nil {
			claim.release(deps)
			return p
		}
		// One flow a request, its client's: its publishes take their
		// turns in the producer's window beside a batch's, not behind
		// them, and each client takes its turn beside the others.
		if err := publish(retry.NewFlow(r.Context(), identity(r.Context())), deps, m, pub, ingress, n, channels); err != nil {
			claim.release(deps)
			deps.Log.Warn("notification not accepted", "id", n.ID, "channels", channels, "error", err.Error())
			return publishProblem(err, ingress, deps.PublishTimeout)
		}
		answer := acceptedOf(deps.Channels, n, channels)
		answer.Rounded = sched.rounded
		body, _ := json.Marshal(answer)
		body = append(body, '\n')
		claim.complete(deps, body)
		deps.Log.Info("notification accepted", "id", n.ID, "channels", channels,
			"idempotency_key", hasKey, "duration_ms", time.Since(start).Milliseconds())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(body)
		return nil
	})
}

// publish sends every copy of n to the ingress exchange at once
// and waits for all the confirms, within the publish timeout.
func publish(ctx context.Context, deps Deps, m *metrics, pub Publisher, ingress string, n *notification.Notification, channels []string) error {
	ctx, cancel := context.WithTimeout(ctx, deps.PublishTimeout)
	defer cancel()
	var wg sync.WaitGroup
	outcome := send(ctx, deps, m, pub, ingress, n, channels, &wg)
	wg.Wait()
	return outcome()
}

// send starts publishing every copy of n (one per channel, or per
// recipient for email: see copiesOf) and the history's record of it, on
// wg, and returns what gives their outcome once wg is done. The record is
// confirmed with the copies: a 202 means the history will know the
// notification too. Notifications that share wg share one wait for all
// their confirms. A message that cannot be encoded fails n before
// anything of it is sent; so does a panic, which only n's goroutine sees.
func send(ctx context.Context, deps Deps, m *metrics, pub Publisher, ingress string, n *notification.Notification, channels []string, wg *sync.WaitGroup) (outcome func() error) {
	var err error
	wg.Go(func() {
		defer func() {
			if v := recover(); v != nil {
				deps.Log.Error("panic publishing", "id", n.ID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				err = fmt.Errorf("%w: publish %s: panic: %v", errInternal, n.ID, v)
			}
		}()
		err = sendAll(ctx, deps, m, pub, ingress, n, channels)
	})
	return func() error { return err }
}

// sendAll is send's work on n's own goroutine: it encodes n's copies and
// record, publishes them all, the copies first, and awaits their confirms
// together.
func sendAll(ctx context.Context, deps Deps, m *metrics, pub Publisher, ingress string, n *notification.Notification, channels []string) error {
	msgs, copies, err := copiesOf(deps.Channels, n, channels)
	if err != nil {
		return err
	}
	rec, err := events.AcceptedPublishing(record(deps.Channels, n, channels, copies), AppID)
	if err != nil {
		return fmt.Errorf("%w: %w", errInternal, err)
	}
	out := make([]retry.Outgoing, 0, len(msgs)+1)
	published := make([]func(error), len(msgs))
	for i := range msgs {
		_, published[i] = deps.tracePublish(ctx, ingress, copies[i].Channel, n.ID, &msgs[i])
		o, err := outgoingCopy(deps, ingress, copies[i].Channel, n, msgs[i])
		if err != nil {
			// Nothing of n is sent: its copies go together or not at all.
			for j := range i + 1 {
				published[j](err)
			}
			return fmt.Errorf("publish %s to %s: %w", n.ID, copies[i].Channel, err)
		}
		out = append(out, o)
	}
	// The history takes accepted records only from relay's own user.
	rec.UserId = pub.User()
	out = append(out, retry.Outgoing{Exchange: deps.events, Key: events.AcceptedRoutingKey, Msg: rec})
	sent := time.Now()
	res := pub.PublishAll(ctx, out)
	took := time.Since(sent).Seconds()
	errs := make([]error, 0, len(res))
	for i := range msgs {
		published[i](res[i])
		m.confirm.Observe(took)
		m.publishes.WithLabelValues(copies[i].Channel, publishResult(res[i])).Inc()
		if res[i] != nil {
			to := copies[i].Channel
			if r := copies[i].Recipient; r != "" {
				to += " (" + r + ")"
			}
			errs = append(errs, fmt.Errorf("publish %s to %s: %w", n.ID, to, res[i]))
		}
	}
	if last := res[len(msgs)]; last != nil {
		errs = append(errs, fmt.Errorf("publish the accepted record of %s: %w", n.ID, last))
	}
	return errors.Join(errs...)
}

// tracePublish starts the producer span of one channel copy's publish,
// when the API traces, and writes its context into msg's headers
// (traceparent, tracestate): every attempt at the copy, each retry
// included, continues the trace from there. published ends the span with
// the publish's outcome.
func (d Deps) tracePublish(ctx context.Context, exchange, channel, id string, msg *amqp.Publishing) (_ context.Context, published func(error)) {
	if d.tracer == nil {
		return ctx, func(error) {}
	}
	ctx, span := d.tracer.Start(ctx, "publish "+exchange,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			semconv.MessagingSystemRabbitMQ,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("publish"),
			semconv.MessagingDestinationName(exchange),
			semconv.MessagingRabbitMQDestinationRoutingKey(channel),
			semconv.MessagingMessageID(id),
		))
	msg.Headers = tracing.Inject(ctx, msg.Headers)
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// copiesOf encodes the messages n goes out as: one per channel, or for a
// channel that delivers to each recipient on its own (email), one per
// recipient, with the recipient in notification.HeaderRecipient. copies names
// each message's copy, in the same order.
func copiesOf(set channel.Set, n *notification.Notification, channels []string) (msgs []amqp.Publishing, copies []notification.CopyRef, err error) {
	msgs = make([]amqp.Publishing, 0, len(channels))
	copies = make([]notification.CopyRef, 0, len(channels))
	for _, name := range channels {
		parts := []channel.Piece{{Part: n.Parts[name]}}
		if c, lerr := set.Lookup(name); lerr == nil && c.PerRecipient() {
			if parts, err = c.Copies(n.Parts[name]); err != nil {
				return nil, nil, fmt.Errorf("%w: split the %s part of %s: %w", errInternal, name, n.ID, err)
			}
		}
		for _, p := range parts {
			cp := n.For(name)
			if p.Recipient != "" {
				cp.Parts[name] = p.Part
			}
			// MarshalJSON writes what json.Marshal would: the parts are
			// compact already (decodeRequest encoded them), so its pass
			// to validate and compact the output again is skipped.
			body, err := cp.MarshalJSON()
			if err != nil {
				return nil, nil, fmt.Errorf("%w: encode %s copy of %s: %w", errInternal, name, n.ID, err)
			}
			msg := amqp.Publishing{
				ContentType:  notification.ContentType,
				MessageId:    n.ID,
				DeliveryMode: amqp.Persistent,
				Timestamp:    n.CreatedAt,
				AppId:        AppID,
				Type:         MessageType,
				Body:         body,
			}
			if p.Recipient != "" {
				msg.Headers = amqp.Table{notification.HeaderRecipient: p.Recipient}
			}
			if n.Type != "" {
				if msg.Headers == nil {
					msg.Headers = amqp.Table{}
				}
				msg.Headers[notification.HeaderType] = n.Type
			}
			if n.Tenant != "" {
				if msg.Headers == nil {
					msg.Headers = amqp.Table{}
				}
				msg.Headers[notification.HeaderTenant] = n.Tenant
			}
			if !n.DueAt.IsZero() {
				// Its age, and RETRY_DEADLINE, count from when it is due.
				msg.Timestamp = n.DueAt
				if msg.Headers == nil {
					msg.Headers = amqp.Table{}
				}
				msg.Headers[notification.HeaderDueAt] = n.DueAt.UnixMilli()
			}
			msgs = append(msgs, msg)
			copies = append(copies, notification.CopyRef{Channel: name, Recipient: p.Recipient})
		}
	}
	return msgs, copies, nil
}

// record is the history's record of n, whose messages are copies.
func record(set channel.Set, n *notification.Notification, channels []string, copies []notification.CopyRef) notification.Accepted {
	var recipients []string
	perRecipient := false
	for _, name := range n.Channels() {
		recipients = append(recipients, set.RecipientsOf(n, name)...)
	}
	for _, c := range copies {
		perRecipient = perRecipient || c.Recipient != ""
	}
	payload, _ := n.Record()
	a := notification.Accepted{ID: n.ID, Tenant: n.Tenant, CreatedAt: n.CreatedAt, Channels: channels, Recipients: recipients, Payload: payload}
	if !n.DueAt.IsZero() {
		a.DueAt = n.DueAt.UTC()
	}
	if perRecipient {
		a.Copies = copies
	}
	return a
}

// publishProblem says why the broker did not take a notification. Every
// such failure is the broker's side and worth retrying: 503.
func publishProblem(err error, ingress string, timeout time.Duration) *Problem {
	switch {
	case errors.Is(err, retry.ErrUnroutable):
		return unavailable(fmt.Sprintf("no queue is bound to exchange %q for a channel of the notification: the broker's topology is missing", ingress))
	case errors.Is(err, retry.ErrNacked):
		return unavailable("the broker refused the notification (a negative publisher confirm)")
	case errors.Is(err, retry.ErrClosed), errors.Is(err, retry.ErrNotConnected):
		return unavailable("the broker connection closed before the notification was confirmed")
	case errors.Is(err, context.DeadlineExceeded):
		return unavailable(fmt.Sprintf("the broker did not confirm the notification within %s", timeout))
	case errors.Is(err, context.Canceled):
		return unavailable("the request ended before the broker confirmed the notification")
	case errors.Is(err, errInternal):
		return newProblem(ProblemInternal, http.StatusInternalServerError, "Internal error", "the notification could not be published")
	default:
		return unavailable("the broker did not take the notification")
	}
}

// asProblem returns err as the *Problem it is, or a 500 for anything else.
func asProblem(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	return newProblem(ProblemInternal, http.StatusInternalServerError, "Internal error", "")
}

// checkContentType accepts application/json, with a UTF-8 charset at most.
func checkContentType(value string) *Problem {
	if value == "" {
		return unsupportedMediaType("send Content-Type: application/json")
	}
	mt, params, err := mime.ParseMediaType(value)
	if err != nil || mt != "application/json" {
		return unsupportedMediaType(fmt.Sprintf("Content-Type %q is not supported: send application/json", value))
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return unsupportedMediaType(fmt.Sprintf("Content-Type %q is not supported: the only parameter allowed is charset=utf-8", value))
		}
	}
	return nil
}

// status is the body of the health answers.
type status struct {
	Status string `json:"status"`
}

// handleHealthz answers 200 as long as the process serves HTTP.
func handleHealthz() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, status{Status: "ok"})
	}
}

// handleReadyz answers 200 when the API can take notifications, else 503
// with the reason.
func handleReadyz(deps Deps) http.HandlerFunc {
	return deps.serve(func(w http.ResponseWriter, r *http.Request) error {
		if err := deps.Ready(); err != nil {
			p := newProblem(ProblemNotReady, http.StatusServiceUnavailable, "Not ready", err.Error())
			p.RetryAfter = 1
			return p
		}
		writeJSON(w, http.StatusOK, status{Status: "ok"})
		return nil
	})
}

// handleMetrics serves the registry in the Prometheus text format.
func handleMetrics(reg *prometheus.Registry, log *slog.Logger) http.HandlerFunc {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
	}).ServeHTTP
}

// handleOpenAPI serves the OpenAPI document of the channels the server
// accepts.
func handleOpenAPI(deps Deps) http.HandlerFunc {
	doc := OpenAPI(deps.Channels)
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	}
}

// handleNotFound answers 404 as a problem.
func handleNotFound() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		problem.Write(w, newProblem(ProblemNotFound, http.StatusNotFound, "Not found",
			fmt.Sprintf("no route for %s", r.URL.Path)))
	}
}

// methods are the ones an Allow header may list.
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions}

// handleMethodNotAllowed answers 405 as a problem, with an Allow header
// listing the methods root has a route for on that path.
func handleMethodNotAllowed(root chi.Routes) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range methods {
			if root.Match(chi.NewRouteContext(), m, r.URL.Path) {
				allow = append(allow, m)
			}
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		problem.Write(w, newProblem(ProblemMethodNotAllowed, http.StatusMethodNotAllowed, "Method not allowed",
			fmt.Sprintf("%s %s is not supported; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", "))))
	}
}

// recoverer turns a panic in a handler into a logged 500 problem, so one
// bad request never takes the process down.
func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v) // the server's own signal to drop the connection
				}
				log.Error("panic serving request", "method", r.Method, "path", r.URL.Path,
					"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if sw, ok := w.(interface{ Status() int }); ok && sw.Status() != 0 {
					return // the answer has begun; nothing more can be said
				}
				problem.Write(w, newProblem(ProblemInternal, http.StatusInternalServerError, "Internal error",
					"the request could not be completed"))
			}()
			next.ServeHTTP(w, r)
		})
	}
}
