package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/retry"
)

// TestCancel takes back a scheduled notification, and one whose email
// copy is waiting for a retry while its webhook copy was delivered.
func TestCancel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		due := t0.Add(time.Hour)
		if err := s.Accept(ctx, []notification.Accepted{{ID: "ntf_later", CreatedAt: t0, DueAt: due, Channels: []string{"email", "webhook"}, Payload: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		n := get(t, s, "ntf_later")
		if n.DueAt == nil || !n.DueAt.Equal(due) {
			t.Errorf("DueAt = %v, want %v", n.DueAt, due)
		}
		for _, c := range n.Copies {
			if c.Status != notification.StatusScheduled || c.NextAttemptAt == nil || !c.NextAttemptAt.Equal(due) {
				t.Errorf("%s copy: status %s, next attempt %v; want scheduled, due %v", c.Channel, c.Status, c.NextAttemptAt, due)
			}
		}
		page, err := s.List(ctx, store.Query{Status: notification.StatusScheduled})
		if err != nil || len(page.Items) != 1 || page.Items[0].ID != "ntf_later" || page.Items[0].DueAt == nil {
			t.Errorf("List(status=scheduled) = %+v, %v; want ntf_later with its due time", page.Items, err)
		}

		got, err := s.Cancel(ctx, "ntf_later", "test", t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		want := []notification.CopyRef{{Channel: "email"}, {Channel: "webhook"}}
		if diff := cmp.Diff(want, got.Cancelled); diff != "" {
			t.Errorf("cancelled (-want +got):\n%s", diff)
		}
		for _, c := range get(t, s, "ntf_later").Copies {
			if c.Status != notification.StatusCancelled || len(c.Attempts) != 1 || c.Attempts[0].Outcome != retry.Cancelled {
				t.Errorf("%s copy after Cancel: %+v; want cancelled, one cancelled attempt", c.Channel, c)
			}
			if ok, err := s.Cancelled(ctx, "ntf_later", c.Channel, ""); !ok || err != nil {
				t.Errorf("Cancelled(%s) = %v, %v; want true", c.Channel, ok, err)
			}
		}
		// Again: nothing more to cancel, the same copies already cancelled.
		again, err := s.Cancel(ctx, "ntf_later", "test", t0.Add(2*time.Minute))
		if err != nil || len(again.Cancelled) != 0 || len(again.Already) != 2 {
			t.Errorf("second Cancel = %+v, %v; want nothing cancelled, two already", again, err)
		}
		// The worker that finds it cancelled reports the same attempt.
		record(t, s, notification.Event{ID: "ntf_later", Channel: "email", Attempt: 1, Outcome: retry.Cancelled, At: due, Service: "worker"})
		if c := get(t, s, "ntf_later").Copies[0]; c.Status != notification.StatusCancelled {
			t.Errorf("after the worker's event: %s, want cancelled", c.Status)
		}

		// A notification sent at once: its webhook copy delivered, its
		// email copy failed once and waiting.
		accept(t, s, "ntf_now", "email", "webhook")
		record(t, s,
			notification.Event{ID: "ntf_now", Channel: "webhook", Attempt: 1, Outcome: retry.Delivered, At: t0.Add(time.Second), Service: "test"},
			notification.Event{ID: "ntf_now", Channel: "email", Attempt: 1, Outcome: retry.Failed, At: t0.Add(time.Second), Error: "503", DelayMS: 5000, Service: "test"},
			notification.Event{ID: "ntf_now", Channel: "email", Attempt: 1, Outcome: retry.Retrying, At: t0.Add(time.Second), DelayMS: 5000, Service: "test"},
		)
		if ok, _ := s.Cancelled(ctx, "ntf_now", "email", ""); ok {
			t.Error("Cancelled before Cancel: true")
		}
		got, err = s.Cancel(ctx, "ntf_now", "test", t0.Add(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]notification.CopyRef{{Channel: "email"}}, got.Cancelled); diff != "" {
			t.Errorf("cancelled (-want +got):\n%s", diff)
		}
		if len(got.Untouched) != 1 || got.Untouched[0].Status != notification.StatusDelivered {
			t.Errorf("untouched = %+v, want the delivered webhook copy", got.Untouched)
		}
		email := get(t, s, "ntf_now").Copies[0]
		if email.Status != notification.StatusCancelled || len(email.Attempts) != 2 || email.Attempts[1].N != 2 {
			t.Errorf("email copy = %+v; want cancelled at attempt 2", email)
		}
		// The retry was already on its way and went out: delivered stays.
		record(t, s, notification.Event{ID: "ntf_now", Channel: "email", Attempt: 2, Outcome: retry.Delivered, At: t0.Add(3 * time.Second), Service: "test"})
		if c := get(t, s, "ntf_now").Copies[0]; c.Status != notification.StatusDelivered {
			t.Errorf("delivered after the cancellation: %s, want delivered", c.Status)
		}

		// Due: the requeue stage sent it on to its worker. Still
		// scheduled, and cancellable, until the worker reports.
		if err := s.Accept(ctx, []notification.Accepted{{ID: "ntf_due", CreatedAt: t0, DueAt: t0.Add(time.Second), Channels: []string{"webhook"}}}); err != nil {
			t.Fatal(err)
		}
		record(t, s, notification.Event{ID: "ntf_due", Channel: "webhook", Attempt: 1, Outcome: retry.Requeued, At: t0.Add(time.Second), Service: "retrier"})
		if c := get(t, s, "ntf_due").Copies[0]; c.Status != notification.StatusScheduled || len(c.Attempts) != 0 {
			t.Errorf("due, on its way: %+v, want scheduled, no attempt yet", c)
		}
		if got, err := s.Cancel(ctx, "ntf_due", "test", t0.Add(1100*time.Millisecond)); err != nil || len(got.Cancelled) != 1 {
			t.Errorf("Cancel(due, on its way) = %+v, %v; want the copy cancelled", got, err)
		}
		if c := get(t, s, "ntf_due").Copies[0]; c.Status != notification.StatusCancelled || len(c.Attempts) != 1 || c.Attempts[0].N != 1 {
			t.Errorf("after Cancel: %+v, want cancelled at attempt 1", c)
		}

		if _, err := s.Cancel(ctx, "ntf_unknown", "test", t0); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Cancel(unknown) = %v, want ErrNotFound", err)
		}
	})
}

// TestCancelWhileSending: a copy a worker holds for its attempt is not
// cancelled and is answered as on its way; once given back, or once the
// hold lapsed, a cancellation takes it; a copy cancelled first cannot be
// held for sending.
func TestCancelWhileSending(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		due := t0.Add(time.Hour)
		if err := s.Accept(ctx, []notification.Accepted{
			{ID: "ntf_held", CreatedAt: t0, DueAt: due, Channels: []string{"email", "webhook"}, Payload: []byte(`{}`)},
			{ID: "ntf_lapsed", CreatedAt: t0, DueAt: due, Channels: []string{"email"}, Payload: []byte(`{}`)},
		}); err != nil {
			t.Fatal(err)
		}
		at := t0.Add(time.Hour)
		if cancelled, err := s.HoldCopy(ctx, "ntf_held", "email", "", time.Minute, at); cancelled || err != nil {
			t.Fatalf("HoldCopy = %v, %v; want the copy held", cancelled, err)
		}
		got, err := s.Cancel(ctx, "ntf_held", "test", at.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		wantUntouched := []notification.CopyStatus{{Channel: "email", Status: notification.StatusSending}}
		if diff := cmp.Diff(wantUntouched, got.Untouched); diff != "" || len(got.Cancelled) != 1 || got.Cancelled[0].Channel != "webhook" {
			t.Errorf("Cancel while the email copy is sent: cancelled %v, untouched (-want +got):\n%s", got.Cancelled, diff)
		}
		if cancelled, err := s.HoldCopy(ctx, "ntf_held", "webhook", "", time.Minute, at); !cancelled || err != nil {
			t.Errorf("HoldCopy of the cancelled webhook copy = %v, %v; want cancelled", cancelled, err)
		}
		if err := s.ReleaseCopy(ctx, "ntf_held", "email", "", store.AttemptEnd{Attempt: 1}, at.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if got, err = s.Cancel(ctx, "ntf_held", "test", at.Add(2*time.Second)); err != nil || len(got.Cancelled) != 1 || got.Cancelled[0].Channel != "email" {
			t.Errorf("Cancel after the email copy was given back = %+v, %v; want it cancelled", got, err)
		}
		if cancelled, err := s.HoldCopy(ctx, "ntf_held", "email", "", time.Minute, at); !cancelled || err != nil {
			t.Errorf("HoldCopy after the cancellation = %v, %v; want cancelled", cancelled, err)
		}

		// A worker that died holding a copy: its hold lapses.
		if cancelled, err := s.HoldCopy(ctx, "ntf_lapsed", "email", "", time.Minute, at); cancelled || err != nil {
			t.Fatalf("HoldCopy = %v, %v", cancelled, err)
		}
		if got, err = s.Cancel(ctx, "ntf_lapsed", "test", at.Add(30*time.Second)); err == nil && len(got.Untouched) != 1 {
			t.Errorf("Cancel within the hold = %+v; want the copy on its way", got)
		}
		if got, err = s.Cancel(ctx, "ntf_lapsed", "test", at.Add(2*time.Minute)); err != nil || len(got.Cancelled) != 1 {
			t.Errorf("Cancel after the hold lapsed = %+v, %v; want the copy cancelled", got, err)
		}
	})
}

// TestCancelAfterTheAttempt: the history hears of an attempt through the
// events, long after it ended when the history queue is behind. Until it
// does, a copy given back delivered is answered as delivered, never
// cancelled, however long after; a copy given back failed is cancelled,
// from the attempt after the failed one; a copy never held is cancelled.
func TestCancelAfterTheAttempt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		due := t0.Add(time.Minute)
		if err := s.Accept(ctx, []notification.Accepted{
			{ID: "ntf_sent", CreatedAt: t0, DueAt: due, Channels: []string{"email", "webhook"}, Payload: []byte(`{}`)},
		}); err != nil {
			t.Fatal(err)
		}
		// The email copy went out; the webhook copy's first attempt
		// failed. The history has heard of neither.
		for _, end := range []struct {
			channel string
			end     store.AttemptEnd
		}{
			{"email", store.AttemptEnd{Attempt: 1, Delivered: true}},
			{"webhook", store.AttemptEnd{Attempt: 1}},
		} {
			if cancelled, err := s.HoldCopy(ctx, "ntf_sent", end.channel, "", time.Minute, due); cancelled || err != nil {
				t.Fatalf("HoldCopy(%s) = %v, %v", end.channel, cancelled, err)
			}
			if err := s.ReleaseCopy(ctx, "ntf_sent", end.channel, "", end.end, due.Add(100*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range get(t, s, "ntf_sent").Copies {
			if c.Status != notification.StatusScheduled {
				t.Fatalf("%s copy: %s, want scheduled still: the history has heard of no attempt", c.Channel, c.Status)
			}
		}
		// An hour later, the hold on the delivered copy long past.
		later := due.Add(time.Hour)
		got, err := s.Cancel(ctx, "ntf_sent", "test", later)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]notification.CopyRef{{Channel: "webhook"}}, got.Cancelled); diff != "" {
			t.Errorf("cancelled (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]notification.CopyStatus{{Channel: "email", Status: notification.StatusDelivered}}, got.Untouched); diff != "" {
			t.Errorf("untouched (-want +got):\n%s", diff)
		}
		// The webhook copy's next attempt is the one cancelled.
		if c := get(t, s, "ntf_sent").Copies[1]; c.Status != notification.StatusCancelled || len(c.Attempts) != 1 || c.Attempts[0].N != 2 {
			t.Errorf("webhook copy after Cancel: %+v; want cancelled at attempt 2", c)
		}
		if cancelled, err := s.HoldCopy(ctx, "ntf_sent", "webhook", "", time.Minute, later); !cancelled || err != nil {
			t.Errorf("HoldCopy of the cancelled webhook copy = %v, %v; want cancelled", cancelled, err)
		}
		// The history hears of the attempts at last: each as it was.
		record(t, s,
			notification.Event{ID: "ntf_sent", Channel: "email", Attempt: 1, Outcome: retry.Delivered, At: due, Service: "worker"},
			notification.Event{ID: "ntf_sent", Channel: "webhook", Attempt: 1, Outcome: retry.Failed, At: due, Error: "503", DelayMS: 200, Service: "worker"},
			notification.Event{ID: "ntf_sent", Channel: "webhook", Attempt: 1, Outcome: retry.Retrying, At: due, DelayMS: 200, Service: "retrier"},
		)
		for _, c := range get(t, s, "ntf_sent").Copies {
			want := map[string]notification.Status{"email": notification.StatusDelivered, "webhook": notification.StatusCancelled}[c.Channel]
			if c.Status != want {
				t.Errorf("%s copy: %s, want %s", c.Channel, c.Status, want)
			}
		}
		// Asking again answers the same.
		again, err := s.Cancel(ctx, "ntf_sent", "test", later.Add(time.Second))
		if err != nil || len(again.Already) != 1 || len(again.Untouched) != 1 || again.Untouched[0].Status != notification.StatusDelivered {
			t.Errorf("Cancel again = %+v, %v; want the webhook copy already cancelled, the email copy delivered", again, err)
		}

		// A copy given back delivered whose message comes back (its ack
		// was lost) is held again: on its way once more, then delivered.
		if err := s.Accept(ctx, []notification.Accepted{{ID: "ntf_again", CreatedAt: t0, DueAt: due, Channels: []string{"webhook"}}}); err != nil {
			t.Fatal(err)
		}
		cancel := func(want notification.Status) {
			t.Helper()
			got, err := s.Cancel(ctx, "ntf_again", "test", due.Add(time.Second))
			if err != nil || len(got.Cancelled) != 0 || len(got.Untouched) != 1 || got.Untouched[0].Status != want {
				t.Errorf("Cancel = %+v, %v; want the copy untouched, %s", got, err, want)
			}
		}
		for range 2 {
			if cancelled, err := s.HoldCopy(ctx, "ntf_again", "webhook", "", time.Minute, due); cancelled || err != nil {
				t.Fatalf("HoldCopy = %v, %v; want the copy held", cancelled, err)
			}
			cancel(notification.StatusSending)
			if err := s.ReleaseCopy(ctx, "ntf_again", "webhook", "", store.AttemptEnd{Attempt: 1, Delivered: true}, due); err != nil {
				t.Fatal(err)
			}
			cancel(notification.StatusDelivered)
		}
	})
}
