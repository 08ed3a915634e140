package runner

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestServeMetrics checks the routes a container reaches on METRICS_ADDR:
// Prometheus' /metrics and the health check's /healthz.
func TestServeMetrics(t *testing.T) {
	// The listener the test holds, handed over: a port closed and bound
	// again later may be another test's by then.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	NewTelemetry().serveMetrics(ctx, ln)
	tests := []struct {
		path string
		want int
	}{
		{"/healthz", http.StatusOK},
		{"/metrics", http.StatusOK},
		{"/readyz", http.StatusNotFound},
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, err := client.Get("http://" + addr + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("GET %s = %d, want %d", tt.path, resp.StatusCode, tt.want)
			}
		})
	}
}
