package email_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	mail "github.com/wneessen/go-mail"

	"github.com/relay-demo/relay/email"
	"github.com/relay-demo/relay/retry"
)

func TestClassify(t *testing.T) {
	reply := func(code int) error {
		return fmt.Errorf("send email n-1: %w", &textproto.Error{Code: code, Msg: "from the server"})
	}
	tests := []struct {
		name string
		err  error
		want string // "nil", "transient" or "permanent"
	}{
		{"nil", nil, "nil"},
		{"451", reply(451), "transient"},
		{"421", reply(421), "transient"},
		{"550", reply(550), "permanent"},
		{"554", reply(554), "permanent"},
		{"invalid message", fmt.Errorf("send email n-1: %w: no recipients", email.ErrInvalidMessage), "permanent"},
		{"5xx while connecting", fmt.Errorf("%w: %w", email.ErrConnect, &textproto.Error{Code: 535, Msg: "bad credentials"}), "transient"},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, "transient"},
		{"deadline", fmt.Errorf("send email n-1: %w", context.DeadlineExceeded), "transient"},
		{"cancelled", fmt.Errorf("send email n-1: %w", context.Canceled), "transient"},
		{"connection check", &mail.SendError{Reason: mail.ErrConnCheck}, "transient"},
		{"no recipients in go-mail", &mail.SendError{Reason: mail.ErrGetRcpts}, "permanent"},
		{"no sender in go-mail", &mail.SendError{Reason: mail.ErrGetSender}, "permanent"},
		{"already permanent", retry.Permanent(errors.New("gone")), "permanent"},
		{"unknown", errors.New("something odd"), "transient"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := email.Classify(tt.err)
			kind := "transient"
			switch {
			case got == nil:
				kind = "nil"
			case retry.IsPermanent(got):
				kind = "permanent"
			}
			if kind != tt.want {
				t.Errorf("Classify(%v) is %s, want %s", tt.err, kind, tt.want)
			}
			if tt.err != nil && !errors.Is(got, tt.err) {
				t.Errorf("Classify(%v) = %v, which no longer wraps the original", tt.err, got)
			}
		})
	}
}

// TestClassifyServerReplies runs real replies through Classify, taking the
// go-mail error out of what Send returned so that Classify sees it bare.
func TestClassifyServerReplies(t *testing.T) {
	srv := startServer(t, email.TLSNone)
	s := newSender(t, srv.port, email.TLSNone, nil)

	got := map[string]bool{}
	for _, to := range []string{rcptBusy, rcptGone, rcptDataBusy, rcptDataGone} {
		err := s.Send(t.Context(), message("n-1", to))
		var se *mail.SendError
		if !errors.As(err, &se) {
			t.Fatalf("Send to %s = %v, want a go-mail SendError inside", to, err)
		}
		got[to] = retry.IsPermanent(email.Classify(se))
	}
	want := map[string]bool{rcptBusy: false, rcptGone: true, rcptDataBusy: false, rcptDataGone: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("permanent by recipient (-want +got):\n%s", diff)
	}
}
