package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// brokerOf parses a Broker from env and builds its topology.
func brokerOf(t *testing.T, env map[string]string) (retry.Topology, error) {
	t.Helper()
	var b Broker
	if err := Parse(func(k string) string { return env[k] }, &b); err != nil {
		return retry.Topology{}, err
	}
	return b.Topology(nil)
}

func TestTypes(t *testing.T) {
	base := map[string]string{"DELAY_BACKEND": "levels", "RETRY_DELAYS": "1s,5s", "RETRY_MAX": "3"}
	with := func(kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	def := retry.Policy{Delays: []time.Duration{time.Second, 5 * time.Second}, MaxRetries: 3, Deferrals: 10, Deadline: 24 * time.Hour}
	tests := []struct {
		name string
		env  map[string]string
		want map[string]retry.Policy
	}{
		{"no types", base, nil},
		{"a type inherits what it does not set", with("NOTIFICATION_TYPES", "receipt"), map[string]retry.Policy{"receipt": def}},
		{"a type's own schedule and expiry", with("NOTIFICATION_TYPES", "otp, receipt", "RETRY_OTP_DELAYS", "2s,3s", "RETRY_OTP_MAX", "2", "RETRY_OTP_EXPIRY", "10m"),
			map[string]retry.Policy{
				"otp":     {Delays: []time.Duration{2 * time.Second, 3 * time.Second}, MaxRetries: 2, Deferrals: 10, Deadline: 24 * time.Hour, Expiry: 10 * time.Minute},
				"receipt": def,
			}},
		{"another type's settings are not read", with("NOTIFICATION_TYPES", "receipt", "RETRY_OTP_DELAYS", "2s"), map[string]retry.Policy{"receipt": def}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := brokerOf(t, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, topo.Types); diff != "" {
				t.Errorf("Types (-want +got):\n%s", diff)
			}
			wantHeader := ""
			if tt.want != nil {
				wantHeader = notification.HeaderType
			}
			if topo.TypeHeader != wantHeader {
				t.Errorf("TypeHeader = %q, want %q", topo.TypeHeader, wantHeader)
			}
		})
	}
}

// TestTypesInvalid checks that a bad type setting stops the start with an
// error naming the variable.
func TestTypesInvalid(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"not a token", map[string]string{"NOTIFICATION_TYPES": "otp,Big Type"}, []string{"NOTIFICATION_TYPES", `entry 2, "Big Type"`}},
		{"empty entry", map[string]string{"NOTIFICATION_TYPES": "otp,"}, []string{"NOTIFICATION_TYPES", `entry 2, ""`}},
		{"listed twice", map[string]string{"NOTIFICATION_TYPES": "otp,receipt,otp"}, []string{"NOTIFICATION_TYPES", `"otp" is listed twice`}},
		{"bad delays", map[string]string{"NOTIFICATION_TYPES": "otp", "RETRY_OTP_DELAYS": "2s,soon"}, []string{"RETRY_OTP_DELAYS", "delay 2"}},
		{"a delay too long", map[string]string{"NOTIFICATION_TYPES": "otp", "RETRY_OTP_DELAYS": "2s,2000h"}, []string{"RETRY_OTP_DELAYS", "49 days"}},
		{"bad max", map[string]string{"NOTIFICATION_TYPES": "otp", "RETRY_OTP_MAX": "-1"}, []string{"RETRY_OTP_MAX", "whole number"}},
		{"bad expiry", map[string]string{"NOTIFICATION_TYPES": "otp", "RETRY_OTP_EXPIRY": "ten minutes"}, []string{"RETRY_OTP_EXPIRY", "duration"}},
		{"native cannot follow types", map[string]string{"NOTIFICATION_TYPES": "otp", "DELAY_BACKEND": "native", "QUEUE_TYPE": "quorum"},
			[]string{"NOTIFICATION_TYPES", "DELAY_BACKEND=native", "one schedule"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := brokerOf(t, tt.env)
			if err == nil {
				t.Fatal("Topology accepted it")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
