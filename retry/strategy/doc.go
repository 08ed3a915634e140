// Package strategy implements, side by side, the retry designs the RabbitMQ
// literature proposes, so that each can be run against the same downstream
// and measured.
//
// Every strategy shares one shape: notifications are published to
// notification-exchange with routing key webhook, land in webhook-queue,
// and a retry.Handler consumes them there. What differs is what happens
// when the handler fails:
//
//   - naive-requeue: nack with requeue; the message goes straight back to
//     the head of its queue, forever. naive-requeue-once requeues only a
//     delivery that is not flagged redelivered and dead-letters the next.
//   - dlx-requeue: nack without requeue; the work queue dead-letters into
//     a requeue queue whose consumer sends the message back at once, up to
//     a count kept in a header.
//   - delayed-exchange: relay's default pipeline (retry.Topology, Stages
//     and Consumer) with the delayed-message plugin. On a broker without
//     the plugin Declare fails with ErrUnsupported; it is never faked.
//   - ttl-wait-queue: a consumer counts each failure in a header and puts
//     the message in one wait queue with a fixed TTL, which dead-letters it
//     back; past the limit it parks.
//   - per-message-ttl: the consumer acks and republishes to one wait queue
//     with expiration base × n. Per-message TTL only fires at the head of a
//     queue, so a short wait stuck behind a long one waits for it.
//   - ttl-tiers: the default pipeline with one TTL wait queue per delay.
//   - quorum-delivery-limit: a quorum queue with x-delivery-limit; the
//     consumer rejects with requeue and the broker dead-letters a message
//     once its delivery count passes the limit.
//   - retry-aware-dlx: the idea of the retry-aware dead-letter exchange
//     plugin, done by a consumer: a per-message x-retry-max, a count that
//     never resets so that count % max == 0 parks once per cycle (a message
//     replayed from the dead-letter queue gets a fresh cycle), and parking
//     through a headers exchange with x-dead-source.
//
// Messages that are given up on go through dead-letter-exchange, a headers
// exchange, into dead-letter-queue, keeping their body and headers.
package strategy
