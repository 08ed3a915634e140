//go:build integration

package bench

import (
	"context"
	"testing"
	"time"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
)

// TestDeadLettersFigure runs the deadletters figure small: every email
// copy arrives once, none is lost, the webhook ones stay parked, and the
// figure deletes what it declared.
func TestDeadLettersFigure(t *testing.T) {
	url := retrytest.URL(t)
	b := &bench{url: url, prefix: retrytest.Prefix(t), janitor: &janitor{url: url}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := b.DeadLetters(ctx, DeadLettersOptions{Copies: 2000, QueueType: retry.Classic})
	if cerr := b.janitor.clean(); cerr != nil {
		t.Error(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.Arrived != 1000 || res.Duplicates != 0 || res.Lost != 0 || res.LeftParked != 1000 || res.PerSecond <= 0 {
		t.Errorf("figure: %+v", res)
	}
}
