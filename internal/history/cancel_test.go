package history_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/history"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// TestCancel takes back a scheduled notification, and one whose email
// copy is waiting for a retry while its webhook copy was delivered.
func TestCancel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *history.Store) {
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
		page, err := s.List(ctx, history.Query{Status: notification.StatusScheduled})
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

		if _, err := s.Cancel(ctx, "ntf_unknown", "test", t0); !errors.Is(err, history.ErrNotFound) {
			t.Errorf("Cancel(unknown) = %v, want ErrNotFound", err)
		}
	})
}

// TestCancelWhileSending: a copy a worker holds for its attempt is not
// cancelled and is answered as on its way; once given back, or once the
// hold lapsed, a cancellation takes it; a copy cancelled first cannot be
// held for sending.
func TestCancelWhileSending(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *history.Store) {
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
		if err := s.ReleaseCopy(ctx, "ntf_held", "email", ""); err != nil {
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
