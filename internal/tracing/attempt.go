package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/relay-demo/relay/retry"
)

// Scope is the instrumentation scope of the spans this package starts.
const Scope = "github.com/relay-demo/relay/internal/tracing"

// Attributes relay records besides the semantic conventions' own.
const (
	// AttrAttempt is an attempt's number: 1 the first time, 2 after the
	// first retry, and so on (retry.Message.Attempt).
	AttrAttempt = attribute.Key("relay.attempt")
	// AttrOutcome is what became of an attempt or a send: one of the
	// Outcome constants.
	AttrOutcome = attribute.Key("relay.outcome")
	// AttrRetryAfter is the wait, in milliseconds, a downstream asked for
	// before the next attempt (an HTTP Retry-After).
	AttrRetryAfter = attribute.Key("relay.retry_after_ms")
	// AttrRedelivered is set on an attempt at a copy the broker delivered
	// before without an acknowledgement: a consumer crashed or
	// disconnected.
	AttrRedelivered = attribute.Key("relay.redelivered")
)

// Outcomes, the values of AttrOutcome. A failed attempt goes on to the
// retry stages, which decide whether it is retried or parked; a permanent
// one is parked at once.
const (
	OutcomeDelivered = string(retry.Delivered)
	OutcomeFailed    = string(retry.Failed)
	OutcomePermanent = "permanent"
)

// Middleware makes each attempt at a message a consumer span of the trace
// its headers carry: the API's, for a notification it accepted, on the
// first attempt and on every retry after it, however long the wait. The
// span records the attempt's number, the queue and the message id, and
// the outcome (see End); the handler runs under it, so a channel's send
// is its child.
func Middleware(tp trace.TracerProvider) retry.Middleware {
	tracer := tp.Tracer(Scope)
	return func(next retry.Handler) retry.Handler {
		return retry.HandlerFunc(func(ctx context.Context, m *retry.Message) error {
			ctx, span := tracer.Start(Extract(ctx, m.Headers), "process "+m.Queue,
				trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(
					semconv.MessagingSystemRabbitMQ,
					semconv.MessagingOperationTypeProcess,
					semconv.MessagingOperationName("process"),
					semconv.MessagingDestinationName(m.Queue),
					semconv.MessagingMessageID(m.ID),
					AttrAttempt.Int(m.Attempt),
				))
			if m.Redelivered {
				span.SetAttributes(AttrRedelivered.Bool(true))
			}
			// A panic goes on to retry.Call, which makes it a failure;
			// the span ends as one.
			panicked := true
			defer func() {
				if panicked {
					EndPanic(span)
				}
			}()
			err := next.Handle(ctx, m)
			panicked = false
			End(span, err)
			return err
		})
	}
}

// End records err as the outcome of what span covered and ends it: nil is
// delivered; an error is failed (or permanent, for one retry.IsPermanent
// says no retry can fix, with the wait a downstream asked for, if any) and
// sets the span's status to Error with the error's text.
func End(span trace.Span, err error) {
	defer span.End()
	if err == nil {
		span.SetAttributes(AttrOutcome.String(OutcomeDelivered))
		return
	}
	outcome := OutcomeFailed
	if retry.IsPermanent(err) {
		outcome = OutcomePermanent
	}
	span.SetAttributes(AttrOutcome.String(outcome), semconv.ErrorType(err))
	if d, ok := retry.RetryAfter(err); ok {
		span.SetAttributes(AttrRetryAfter.Int64(d.Milliseconds()))
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// EndPanic ends span as failed by a panic, which it leaves to go on: the
// retry pipeline makes a handler's panic a failure.
func EndPanic(span trace.Span) {
	span.SetAttributes(AttrOutcome.String(OutcomeFailed))
	span.SetStatus(codes.Error, "panic")
	span.End()
}
