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
//   - delay-levels: the default pipeline on binary delay levels
//     (retry.Levels): 32 queues holding a message 2^k ms each, chained by
//     topic exchanges that route on one word per bit of the delay, so any
//     delay is served exactly, jitter included, on any broker.
//   - native-delayed-retry: the default pipeline on RabbitMQ 4.3's delayed
//     retry (retry.Native): the quorum work queue delays a rejected message
//     itself and dead-letters it past the delivery limit. On an older
//     broker Declare fails with a NotRunnable naming the broker's version.
//
// The pipeline strategies (delayed-exchange, ttl-tiers, delay-levels) also
// run with the direct hand-off (retry.Direct) under their name with
// DirectSuffix, such as delay-levels/direct: the worker publishes each
// retry to wait itself, and no requeue stage sends it back.
//
// Messages that are given up on go through dead-letter-exchange, a headers
// exchange, into dead-letter-queue, keeping their body and headers.
package strategy
