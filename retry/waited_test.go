package retry

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func TestWaited(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		d    amqp.Delivery
		want time.Duration
	}{
		{"since its timestamp", amqp.Delivery{Timestamp: now.Add(-90 * time.Second)}, 90 * time.Second},
		{"since its wait ended, not since it was published", amqp.Delivery{
			Timestamp: now.Add(-time.Hour),
			Headers:   amqp.Table{HeaderReadyAt: now.Add(-1500 * time.Millisecond).UnixMilli()},
		}, 1500 * time.Millisecond},
		{"a ready-at that is not a number is ignored", amqp.Delivery{
			Timestamp: now.Add(-time.Minute),
			Headers:   amqp.Table{HeaderReadyAt: "soon"},
		}, time.Minute},
		{"nothing known", amqp.Delivery{}, 0},
		{"a clock ahead reads as zero", amqp.Delivery{Timestamp: now.Add(time.Minute)}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := waited(&tt.d, now); got != tt.want {
				t.Errorf("waited = %v, want %v", got, tt.want)
			}
		})
	}
}
