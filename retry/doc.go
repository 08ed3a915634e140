// Package retry moves failed RabbitMQ messages through a delay and back,
// and parks them, with their history, when retrying is over.
//
// A Pipeline is the whole of it in one value: New with a Config (the
// schedule lives there, once), Handle each queue with a Handler, Use
// middleware around the handlers, ServeStages in at least one process, and
// Run until the context ends; see the package example. Topology, Consumer
// and Stages are the parts it is built from, and Serve, Hop, Forward,
// Republish and Park the primitives under them, for other retry designs
// (lab/strategy builds nine on them).
//
// # The pipeline
//
//	producer ──► ingress exchange ──► work queue ──► Consumer(Handler)
//	                                      │ nack (requeue=false): the queue's dead-letter exchange
//	                                      ▼
//	                  error-exchange ──► error-queue ──► error stage
//	     retries < max: wait-exchange ─(delay)─► requeue-queue ──► requeue stage ──► work queue
//	    retries = max, or permanent: dead-letter-exchange (headers) ──► dead-letter-queue
//
// A Consumer runs a Handler on a work queue. A nil error acks the message.
// Any other error is handed to error-exchange by the consumer itself, with
// its text in x-last-error (a nack cannot carry it) and, for an error
// wrapped by After, the wait the downstream asked for; the message is
// acked once the broker confirmed that copy. Only if the hand-off fails is
// the message nacked without requeue, for the work queue's dead-letter
// exchange to take it to the same place. An error wrapped by Permanent is
// parked at once. The consumer needs no knowledge of delays.
//
// Stages runs the two consumers of the pipeline. The error stage counts the
// attempt, picks the delay from the Policy, and publishes the message to
// the wait exchange; past the last retry it parks the message through the
// dead-letter exchange with x-dead-source and x-dead-reason, which a
// headers exchange can route on: bind your own dead-letter queues by source
// queue or by business headers. The requeue stage publishes each message
// whose wait is over back to its work queue through the default exchange.
//
// # Guarantees, in short
//
// Every hand-off publishes a copy, waits for the broker's publisher confirm,
// and only then acks the original: the pipeline is at-least-once, and
// downstreams deduplicate on the message id. The one hop no client
// confirms is the broker's own dead-lettering from a work queue to
// error-exchange, at-most-once on classic queues; Topology declares quorum
// queues that keep it (QueueType Quorum). The retry count is relay's own,
// x-retry-count, since RabbitMQ 3.13 no longer interprets an x-death header
// a client publishes. No header moves a message outside the topology's
// work queues (Topology.Destination) or its count outside 0..max retries.
//
// # Hand-offs
//
// With ViaStages (the default, the article's topology) a failure takes two
// consumer hops: the worker hands it to error-exchange, the error stage
// decides, and after the wait the requeue stage sends it back. With Direct,
// the worker makes the same decision itself and publishes the message to
// wait with its own queue as the destination: one confirmed publish per
// retry.
//
// # Hints and deadlines
//
// A downstream's "come back in N seconds" (an error with a RetryAfter
// method) waits exactly that long without spending a retry, up to the
// policy's deferral budget; a message failing past the policy's deadline
// is parked as deadline-exceeded, whatever its count.
//
// # Types and expiry
//
// A topology may carry a policy per message type (Topology.Types), read
// from the header Topology.TypeHeader names: every decision about a
// message follows its type's policy, and the default Policy follows a
// message of no type or of one it does not list. A policy with an Expiry
// parks a message as expired rather than deliver it late: before an
// attempt once it is past the expiry, and at once after a failure whose
// next retry would come back past it.
//
// # Delay backends
//
// Plugin waits in an x-delayed-message exchange, TTL in one queue per
// delay step, Levels in 32 queues of 2^k ms each that together serve any
// delay exactly, and Native (RabbitMQ 4.3 and later, quorum queues) in the
// work queue itself. TTL and Native declare the levels too, for every wait
// their own cannot keep exactly (a Retry-After, a rate limit's slot, a
// scheduled send), so every backend waits any delay to the millisecond.
// Each backend is one type that declares its Features; Topology.Validate
// refuses what a backend does not promise. Auto picks Native where it can,
// else the plugin where the broker has it, else Levels; see Choose.
//
// # Further reading
//
// This page is the overview; relay's repository holds the reasoning, once:
// docs/retries.md (why each step is built the way it is, the delay
// backends compared, and which runs on which RabbitMQ) and
// docs/guarantees.md (what relay promises end to end, and which headers it
// trusts). "The article" is "RabbitMQ Retries — The (new) Full Story", the
// notification service with email and webhook queues whose option C is
// this pipeline; it builds on "RabbitMQ Retries — The Full Story" by Erez
// Rabih (Nanit Engineering). docs/workshop runs the designs of both side by
// side, one chapter each.
package retry
