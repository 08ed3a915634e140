package tracing

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestExporting(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    string // the endpoint, "" for off
		wantErr string // a variable the error names
	}{
		{"nothing set: off", nil, "", ""},
		{"an endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318"}, "http://jaeger:4318", ""},
		{"the traces endpoint first", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b:4318/v1/traces"}, "https://b:4318/v1/traces", ""},
		{"credentials kept out of the log", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:pass@collector:4318"},
			"https://user:xxxxx@collector:4318", ""},
		{"http/json", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "http://c:4318", ""},
		{"the SDK disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, "", ""},
		{"no exporter", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, "", ""},
		{"another exporter", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "zipkin"}, "", "OTEL_TRACES_EXPORTER"},
		{"gRPC", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "", "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"gRPC for traces", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{"no scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "jaeger:4318"}, "", "OTEL_EXPORTER_OTLP_ENDPOINT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := exporting(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("exporting = %q, %v; want an error naming %s", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("exporting = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestStartOff: without an endpoint there is nothing to trace to and
// nothing runs.
func TestStartOff(t *testing.T) {
	before := runtime.NumGoroutine()
	tr, err := start(context.Background(), "relay-test", func(string) string { return "" }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if after := runtime.NumGoroutine(); after != before {
		t.Errorf("%d goroutines before, %d after: want none started", before, after)
	}
	if tr.Enabled() {
		t.Error("Enabled with no endpoint")
	}
	if tr.Provider() != nil {
		t.Errorf("Provider is a %T, want none", tr.Provider())
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestStartFromContext: a provider in the context wins over the
// environment, and is its owner's to shut down.
func TestStartFromContext(t *testing.T) {
	tp, rec := recorder(t)
	ctx := WithProvider(context.Background(), tp)
	tr, err := start(ctx, "relay-test", func(string) string { return "http://unused:4318" }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled() || tr.Provider() != tp {
		t.Fatalf("Provider = %v, want the context's", tr.Provider())
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("test").Start(ctx, "after")
	span.End()
	if len(rec.Ended()) != 1 {
		t.Error("Shutdown stopped a provider it does not own")
	}
}

// TestStartExports runs the real exporter against a stand-in collector:
// the process environment configures it, Shutdown flushes what is
// buffered, and the spans carry the service's name.
func TestStartExports(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	var paths []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies, paths = append(bodies, b), append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20secret-token")
	var logs bytes.Buffer
	tr, err := Start(context.Background(), "relay-worker-test", slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled() {
		t.Fatal("not Enabled with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}
	_, span := tr.Provider().Tracer("test").Start(context.Background(), "a-span-to-export")
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 || paths[0] != "/v1/traces" {
		t.Fatalf("the collector got %d requests on %q, want one on /v1/traces", len(bodies), paths)
	}
	for _, want := range []string{"relay-worker-test", "a-span-to-export"} {
		if !bytes.Contains(bodies[0], []byte(want)) {
			t.Errorf("the export does not carry %q", want)
		}
	}
	if !strings.Contains(logs.String(), collector.URL) || strings.Contains(logs.String(), "secret-token") {
		t.Errorf("the start-up log should name the endpoint and no header: %s", logs.String())
	}
}
