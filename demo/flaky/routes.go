package flaky

import "net/http"

// routes registers every HTTP route of the flaky process on mux.
func routes(mux *http.ServeMux, d deps) {
	mux.HandleFunc("POST /webhooks/", handleWebhook(d))
	mux.HandleFunc("GET /stats", handleStats(d))
	mux.HandleFunc("GET /messages", handleMessages(d))
	mux.HandleFunc("GET /healthz", handleHealthz())
}
