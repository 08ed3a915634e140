// Package retry moves failed RabbitMQ messages through a delay and back,
// and parks them, with their history, when retrying is over.
//
// A Pipeline is the whole of it in one value: New with a Config (the
// schedule lives there, once), Handle each queue with a Handler, Use
// middleware around the handlers, ServeStages in at least one process, and
// Run until the context ends; see the package example. Topology, Consumer
// and Stages are the parts it is built from, and Serve, Hop, Forward,
// Republish and Park the primitives under them, for other retry designs
// (retry/strategy builds nine on them).
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
// # Delivery guarantees
//
// Every hand-off publishes a copy, waits for the broker's publisher confirm,
// and only then acks the original. A crash between the two leaves both
// copies, never neither: the pipeline is at-least-once, and downstreams
// deduplicate on the message id. A negative confirm or a returned
// (unroutable) message counts as a failed hand-off: the original goes back
// to its queue. Nothing is dropped.
//
// The broker's own dead-lettering, from a work queue to error-exchange, is
// the one step the client does not confirm. For classic queues it is
// at-most-once: if the target is missing or refuses the message, it is
// gone. Quorum queues with x-dead-letter-strategy at-least-once (and
// x-overflow reject-publish, which that strategy needs) keep the message
// until the target has it; Topology declares them that way when QueueType
// is Quorum. Use quorum queues in production.
//
// # What relay trusts
//
// AMQP 0-9-1 cannot tell who wrote a header, and any client allowed to
// publish on the virtual host can set x-original-queue, x-retry-count or
// x-death. relay therefore routes and counts only within bounds that no
// header can move:
//
//   - The stages and replay publish a message only to one of the
//     topology's work queues (Topology.Destination). A message that names
//     another queue, relay's own internal ones included, or none, is
//     parked once as unknown-source with the claim kept in
//     x-claimed-source, and the stage logs the header and its value.
//   - The error stage takes the source first from what the broker wrote
//     when it dead-lettered the message (the newest x-death entry, then
//     x-last-death-queue), then from x-original-queue, which the consumer
//     writes from the queue it consumed. x-first-death-queue is never read.
//   - On a message a producer published to the ingress exchange, relay's
//     own headers were not written by relay: the consumer drops them, so
//     the count starts at zero.
//   - A count is clamped to 0..max retries: a forged one can only shorten
//     its own message's retries. Only the error stage raises it, so a
//     message passes the worker and each stage at most max retries + 1
//     times; the TTL backend's extra waiting rounds for a long Retry-After
//     are bounded by MaxWaits.
//   - A message whose headers do not fit the connection's frame is parked
//     as headers-too-large; one too large to be delivered at all is moved
//     aside over the management API (see Management).
//
// To keep clients out of relay's internal exchanges and queues entirely,
// give them RabbitMQ permissions that write only to the ingress exchange.
//
// # Why the count is not read from x-death
//
// The broker records each dead-lettering in the x-death header, and older
// articles count retries with it. Since RabbitMQ 3.13 the broker no longer
// interprets an x-death header that a client publishes: every time the
// error stage republishes a message, the broker's count would start again
// at 1. relay keeps its own count in x-retry-count, written by the error
// stage, and strips x-death (and the delay plugin's x-delay) whenever it
// republishes. x-death is only read to find the queue a message was just
// dead-lettered from, and to show history.
//
// # Hand-offs
//
// With the article's topology (ViaStages, the default) a failure takes two
// consumer hops: the worker hands it to error-exchange, the error stage
// decides, and after the wait the requeue stage sends it back. With Direct,
// the worker decides itself (the same decision, in one function), publishes
// the message to wait with its own queue as the destination, and the broker
// routes it back when the wait is over: one confirmed publish per retry.
// The error stage stays, for a worker's fallback nack; there is no
// requeue-queue.
//
// # Hints and deadlines
//
// A downstream's "come back in N seconds" (an error with a RetryAfter
// method) waits exactly that long without spending a retry, up to the
// policy's deferral budget; a message failing past the policy's deadline
// is parked as deadline-exceeded, whatever its count.
//
// # Delay backends
//
// With the Plugin backend, wait-exchange is an x-delayed-message exchange
// (rabbitmq_delayed_message_exchange) and the delay travels per message in
// the x-delay header, in milliseconds, clamped to 1..2^32-1. The plugin keeps
// waiting messages outside any queue on a single node and routes them only
// once their delay is over: with mandatory it would return every message as
// unroutable (312 NO_ROUTE) and still deliver it later, so it is never
// published to with mandatory.
//
// With the TTL backend, wait-exchange is a direct exchange routing to one
// queue per distinct delay (wait.500ms, wait.5s, ...) whose x-message-ttl
// expires messages on. A queue per step avoids the head-of-line blocking
// of per-message TTLs, where a message with a short TTL waits behind one
// with a long TTL. It runs on any broker, clusters and quorum queues
// included, but cannot jitter; a wait longer than the longest step (a
// downstream's Retry-After) is served by waiting again, at most MaxWaits
// times, guided by the x-retry-not-before header.
//
// With the Levels backend, 32 queues wait.level.00 to wait.level.31 hold a
// message 2^k ms each, and topic exchanges in front of them route on one
// word per level of the routing key: a message waits in exactly the levels
// of the bits set in its delay, so any delay from 1 ms to 2^32-1 ms is
// served exactly, with jitter and any Retry-After, on any broker, classic
// or quorum, single node or cluster, and every waiting message sits in an
// ordinary queue where it can be seen and purged. It declares 65 objects.
//
// With the Native backend (RabbitMQ 4.3 and later, quorum queues), the
// work queues themselves delay a rejected message, min(first delay ×
// attempt, last delay), and dead-letter it past the delivery limit: no
// wait objects, no hops, but only linear schedules, no per-message
// Retry-After over AMQP 0-9-1, and no error text on the parked copy.
//
// Auto picks Native where it can, else the plugin where the broker has
// it, else Levels; see Choose.
package retry
