package retry

import "time"

// Outcome is what became of a message at one step of the pipeline. The
// pipeline, the consumers, the strategies of lab/strategy and relay's
// events, history and dashboard all speak of it in these words.
type Outcome string

// The outcomes.
const (
	// Delivered: the handler succeeded and the message was acked.
	Delivered Outcome = "delivered"
	// Failed: the handler failed and the message was handed on to be
	// retried.
	Failed Outcome = "failed"
	// Retrying: the next attempt was scheduled after Event.Delay.
	Retrying Outcome = "retrying"
	// Waiting: the message waits once more before its next attempt (a
	// wait longer than the delay backend's steps).
	Waiting Outcome = "waiting"
	// Requeued: the message, its wait over, went back to its work queue.
	Requeued Outcome = "requeued"
	// Parked: the message was parked in the dead-letter queue, with
	// Event.Reason.
	Parked Outcome = "parked"
	// Replayed: a parked message was sent back to its work queue.
	Replayed Outcome = "replayed"
	// Cancelled: the handler said the message is no longer wanted (see
	// Cancel): acked, neither delivered nor parked.
	Cancelled Outcome = "cancelled"
)

// Terminal reports whether nothing more happens to a message after o
// (until it is replayed).
func (o Outcome) Terminal() bool { return o == Delivered || o == Parked || o == Cancelled }

// Event is one decision of the pipeline or a consumer, for observers.
type Event struct {
	// Outcome is what was decided.
	Outcome   Outcome
	MessageID string
	// Copy is which copy of the message this is, when its producer sends
	// several with one id: the topology's CopyHeader (see Topology.Copy).
	Copy string
	// Tenant is whose the message is, when its producer says so: the
	// topology's TenantHeader (see Topology.Tenant).
	Tenant string
	// Queue is the work queue the message belongs to.
	Queue string
	// Attempt is the attempt that just ended (1 for the first delivery).
	Attempt int
	// Round is how often the message was replayed from the dead-letter
	// queue: attempts count from 1 again in each round.
	Round int
	// Delay is the wait scheduled before the next attempt.
	Delay time.Duration
	// Deferred is, for Retrying, whether Delay is a wait the handler's
	// error asked for (see After) within the policy's deferral budget: a
	// rate limit's slot or a downstream's Retry-After. Such a wait spends
	// no retry; an observer should show it as a deferral, not as one more
	// failure on the way to being parked.
	Deferred bool
	// Reason is why a message was parked.
	Reason string
	// Err is the failure's text, where known.
	Err string
	// At is when the decision was made.
	At time.Time
	// Duration is how long the attempt took, for a consumer's outcome.
	Duration time.Duration
	// Published is the message's AMQP timestamp, set by its producer:
	// At minus Published is the message's age.
	Published time.Time
	// Received is, for a consumer's outcome, when the consumer received
	// the message; zero for the stages' decisions.
	Received time.Time
	// Waited is, for a consumer's outcome, how long the message had been
	// ready in its work queue when the consumer received it: since its
	// retry wait ended or it was replayed (HeaderReadyAt), else since its
	// AMQP timestamp (when its producer published it, or it fell due).
	// Zero when neither is known, or when a clock ahead of the
	// consumer's puts that moment in the future.
	Waited time.Duration
	// Target is, for a consumer's outcome, what the handler said the
	// message was for (Message.Target).
	Target string
	// Via is where the attempt went, as its handler said (Message.Via):
	// the provider of a channel with several. Empty when not said.
	Via string
}
