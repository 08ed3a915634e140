package worker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
)

// fakeCancellations answers from a set of cancelled copies, or with err,
// and notes the copies given back.
type fakeCancellations struct {
	cancelled map[string]bool // id/channel/recipient
	err       error
	asked     int
	released  []string
	ends      []store.AttemptEnd
}

func (f *fakeCancellations) HoldCopy(_ context.Context, id, channel, recipient string, hold time.Duration, _ time.Time) (bool, error) {
	f.asked++
	if hold <= 0 {
		f.err = errors.New("no hold")
	}
	return f.cancelled[id+"/"+channel+"/"+recipient], f.err
}

func (f *fakeCancellations) ReleaseCopy(_ context.Context, id, channel, recipient string, end store.AttemptEnd, _ time.Time) error {
	f.released = append(f.released, id+"/"+channel+"/"+recipient)
	f.ends = append(f.ends, end)
	return nil
}

func TestCheckCancelled(t *testing.T) {
	due := amqp.Table{notification.HeaderDueAt: int64(1)}
	tests := []struct {
		name          string
		msg           retry.Message
		err           error
		sendErr       error
		wantAsked     bool
		wantSent      bool
		wantCancelled bool
		wantErr       bool
	}{
		{name: "first attempt, sent at once: not asked", msg: retry.Message{ID: "ntf_a", Attempt: 1}, wantSent: true},
		{name: "scheduled, not cancelled", msg: retry.Message{ID: "ntf_a", Attempt: 1, Headers: due}, wantAsked: true, wantSent: true},
		{name: "scheduled, not cancelled, the attempt fails", msg: retry.Message{ID: "ntf_a", Attempt: 1, Headers: due}, sendErr: errors.New("503"),
			wantAsked: true, wantSent: true, wantErr: true},
		{name: "a retry in a later round", msg: retry.Message{ID: "ntf_a", Attempt: 2, Round: 1}, wantAsked: true, wantSent: true},
		{name: "scheduled, cancelled", msg: retry.Message{ID: "ntf_b", Attempt: 1, Headers: due}, wantAsked: true, wantCancelled: true},
		{name: "a retry, cancelled", msg: retry.Message{ID: "ntf_b", Attempt: 3}, wantAsked: true, wantCancelled: true},
		{name: "a recipient's copy, another recipient's cancelled", msg: retry.Message{ID: "ntf_c", Attempt: 2,
			Headers: amqp.Table{notification.HeaderRecipient: "ada@example.com"}}, wantAsked: true, wantSent: true},
		{name: "the store cannot answer: a failure, retried", msg: retry.Message{ID: "ntf_a", Attempt: 2}, err: errors.New("database is locked"),
			wantAsked: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &fakeCancellations{err: tt.err, cancelled: map[string]bool{
				"ntf_b/webhook/": true, "ntf_c/webhook/grace@example.com": true}}
			sent := false
			h := checkCancelled("webhook", func(context.Context) (Cancellations, error) { return st, nil }, func(context.Context, *retry.Message) error { sent = true; return tt.sendErr })
			m := tt.msg
			err := h(t.Context(), &m)
			if (st.asked > 0) != tt.wantAsked || sent != tt.wantSent || retry.IsCancelled(err) != tt.wantCancelled ||
				(err != nil && !retry.IsCancelled(err)) != tt.wantErr {
				t.Errorf("asked %d, sent %v, err %v; want asked %v, sent %v, cancelled %v, error %v",
					st.asked, sent, err, tt.wantAsked, tt.wantSent, tt.wantCancelled, tt.wantErr)
			}
			// A copy held for a send is given back after it, and only then.
			key := m.ID + "/webhook/" + (retry.Topology{CopyHeader: notification.HeaderRecipient}).Copy(m.Headers)
			if wantReleased := tt.wantSent && tt.wantAsked; slices.Contains(st.released, key) != wantReleased || len(st.released) > 1 {
				t.Errorf("released %v; want %s released: %v", st.released, key, wantReleased)
			}
			// With how the attempt ended, which a cancellation reads
			// before the history hears of it.
			if len(st.ends) == 1 {
				want := store.AttemptEnd{Round: m.Round, Attempt: m.Attempt, Delivered: tt.sendErr == nil}
				if st.ends[0] != want {
					t.Errorf("given back as %+v, want %+v", st.ends[0], want)
				}
			}
		})
	}
}

// TestCheckCancelledPanic: an attempt that panics gives its copy back as
// failed, never as delivered.
func TestCheckCancelledPanic(t *testing.T) {
	st := &fakeCancellations{}
	h := checkCancelled("webhook", func(context.Context) (Cancellations, error) { return st, nil }, func(context.Context, *retry.Message) error { panic("boom") })
	m := retry.Message{ID: "ntf_a", Attempt: 2}
	if err := retry.Call(t.Context(), h, &m); err == nil {
		t.Fatal("a panicking attempt succeeded")
	}
	if want := []store.AttemptEnd{{Attempt: 2}}; !slices.Equal(st.ends, want) {
		t.Errorf("given back as %+v, want %+v", st.ends, want)
	}
}
