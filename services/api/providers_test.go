package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
)

func TestListProviders(t *testing.T) {
	h, st, _, _ := endpointServer(t, storetest.SQLite)
	ctx := t.Context()
	if _, err := st.DeclareProviders(ctx, "email", []store.ProviderDecl{{Name: "primary"}, {Name: "backup", Rate: &store.Rate{Per: 4, Burst: 2}}}, now); err != nil {
		t.Fatal(err)
	}
	since := now.Add(time.Second)
	if _, err := st.RecordProviderCircuit(ctx, "email", "primary", store.CircuitChange{State: store.CircuitOpen, Since: since,
		LastError: "421 try again later", FailingSince: &since, At: since}); err != nil {
		t.Fatal(err)
	}

	rec := call(h, http.MethodGet, "/v1/providers", "", nil)
	if rec.Code != http.StatusOK || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("GET = %d %s, want 200, not to be cached", rec.Code, rec.Body)
	}
	type rate struct {
		PerSecond float64 `json:"per_second"`
		Burst     int     `json:"burst"`
		Waiting   int     `json:"waiting"`
	}
	type provider struct {
		Channel  string `json:"channel"`
		Name     string `json:"name"`
		Position int    `json:"position"`
		Circuit  struct {
			State     string     `json:"state"`
			Since     *time.Time `json:"since"`
			LastError string     `json:"last_error"`
		} `json:"circuit"`
		Rate   *rate     `json:"rate"`
		SeenAt time.Time `json:"seen_at"`
	}
	got := decodeAs[struct {
		Providers []provider `json:"providers"`
	}](t, rec).Providers
	want := []provider{
		{Channel: "email", Name: "primary", Position: 0, SeenAt: since},
		{Channel: "email", Name: "backup", Position: 1, Rate: &rate{PerSecond: 4, Burst: 2}, SeenAt: now},
	}
	want[0].Circuit.State, want[0].Circuit.Since, want[0].Circuit.LastError = "open", &since, "421 try again later"
	want[1].Circuit.State = "closed"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("providers (-want +got):\n%s", diff)
	}
	if !strings.Contains(rec.Body.String(), `"rate":null`) {
		t.Errorf("body %s: want a provider without a limit to say rate null", rec.Body)
	}

	if rec := call(h, http.MethodGet, "/v1/providers?channel=email", "", nil); rec.Code != http.StatusUnprocessableEntity {
		t.Errorf("GET with a parameter = %d %s, want 422", rec.Code, rec.Body)
	}
	if rec := call(h, http.MethodGet, "/v1/providers", "", map[string]string{"Authorization": ""}); rec.Code != http.StatusUnauthorized {
		t.Errorf("GET without a token = %d, want 401", rec.Code)
	}
}

func TestListProvidersWithoutHistory(t *testing.T) {
	h, _, _ := testServer(t, nil)
	rec := call(h, http.MethodGet, "/v1/providers", "", nil)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "without a history store") {
		t.Errorf("GET = %d %s, want 503 saying there is no history store", rec.Code, rec.Body)
	}
}

func TestListProvidersNoneDeclared(t *testing.T) {
	h, _, _, _ := endpointServer(t, storetest.SQLite)
	rec := call(h, http.MethodGet, "/v1/providers", "", nil)
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != `{"providers":[]}` {
		t.Errorf("GET = %d %s, want 200 and an empty list", rec.Code, rec.Body)
	}
}
