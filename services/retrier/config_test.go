package retrier_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/relay-demo/relay/services/retrier"
)

func TestRetrierRejectsBadConfig(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"RETRY_DELAYS": "soon"}, "RETRY_DELAYS"},
		{map[string]string{"DELAY_BACKEND": "redis"}, "DELAY_BACKEND"},
		{map[string]string{"QUEUE_TYPE": "stream"}, "QUEUE_TYPE"},
		{map[string]string{"PREFETCH": "0"}, "PREFETCH"},
		{map[string]string{"PREFETCH": "many"}, "PREFETCH"},
		{map[string]string{"RETRY_JITTER": "2"}, "RETRY_JITTER"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			err := retrier.Run(context.Background(), func(k string) string { return tt.env[k] }, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
