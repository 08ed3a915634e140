package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/retry"
)

// Endpoint ids and secrets of the tests.
const (
	ep1     = "ep_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	ep2     = "ep_bbbbbbbbbbbbbbbbbbbbbbbbbb"
	secret1 = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwsecret1="
	secret2 = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwsecret2="
)

func createEndpoint(t *testing.T, s *store.Store, id string, at time.Time) {
	t.Helper()
	err := s.CreateEndpoint(ctxOf(t), store.Endpoint{ID: id, URL: "https://hooks.example.com/" + id, Description: "desc " + id,
		Secret: secret1, CreatedAt: at})
	if err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
}

func endpoint(t *testing.T, s *store.Store, id string) *store.Endpoint {
	t.Helper()
	e, err := s.Endpoint(ctxOf(t), id)
	if err != nil {
		t.Fatalf("endpoint %s: %v", id, err)
	}
	return e
}

func TestEndpointCRUD(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		createEndpoint(t, s, ep1, t0)
		want := &store.Endpoint{ID: ep1, URL: "https://hooks.example.com/" + ep1, Description: "desc " + ep1, Enabled: true,
			Secret: secret1, CreatedAt: t0, UpdatedAt: t0, Circuit: store.Circuit{State: store.CircuitClosed}}
		if diff := cmp.Diff(want, endpoint(t, s, ep1)); diff != "" {
			t.Errorf("created (-want +got):\n%s", diff)
		}
		if err := s.CreateEndpoint(ctx, store.Endpoint{ID: ep1, URL: "https://x.example/", Secret: secret2, CreatedAt: t0}); !errors.Is(err, store.ErrExists) {
			t.Errorf("create twice: %v, want ErrExists", err)
		}
		if err := s.CreateEndpoint(ctx, store.Endpoint{ID: ep2, URL: "https://x.example/", CreatedAt: t0}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("create without secret: %v, want ErrInvalid", err)
		}

		url, desc := "https://other.example.com/hook", ""
		got, err := s.UpdateEndpoint(ctx, ep1, store.EndpointChange{URL: &url, Description: &desc}, t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		want.URL, want.Description, want.UpdatedAt = url, "", t0.Add(time.Minute)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("updated (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, endpoint(t, s, ep1)); diff != "" {
			t.Errorf("read after update (-want +got):\n%s", diff)
		}

		if _, err := s.UpdateEndpoint(ctx, ep2, store.EndpointChange{URL: &url}, t0); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("update unknown: %v, want ErrNotFound", err)
		}
		if err := s.DeleteEndpoint(ctx, ep1); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Endpoint(ctx, ep1); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("read deleted: %v, want ErrNotFound", err)
		}
		if err := s.DeleteEndpoint(ctx, ep1); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("delete twice: %v, want ErrNotFound", err)
		}
	})
}

func TestListEndpoints(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		var want []string
		for i := range 5 {
			id := fmt.Sprintf("ep_%026d", i)
			// Two share a creation time: the id breaks the tie.
			createEndpoint(t, s, id, t0.Add(time.Duration(i/2)*time.Second))
			want = append([]string{id}, want...)
		}
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("too many pages")
			}
			page, err := s.ListEndpoints(ctxOf(t), store.EndpointQuery{Limit: 2, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page.Items {
				got = append(got, e.ID)
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ids (-want +got):\n%s", diff)
		}
		if _, err := s.ListEndpoints(ctxOf(t), store.EndpointQuery{Cursor: "!!"}); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("bad cursor: %v, want ErrBadCursor", err)
		}
	})
}

// TestEndpointTenants: an endpoint keeps the tenant it was created for
// through every change, and a list holds one tenant's endpoints (the
// default tenant's, for a zero query) or, asked to, every tenant's.
func TestEndpointTenants(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		tenantOf := map[string]string{}
		for i, tenant := range []string{"", "acme", "globex", "acme", "", "acme"} {
			id := fmt.Sprintf("ep_%026d", i)
			tenantOf[id] = tenant
			if err := s.CreateEndpoint(ctx, store.Endpoint{ID: id, Tenant: tenant, URL: "https://hooks.example.com/" + id,
				Secret: secret1, CreatedAt: t0.Add(time.Duration(i) * time.Second)}); err != nil {
				t.Fatalf("create %s: %v", id, err)
			}
		}
		for id, want := range tenantOf {
			if got := endpoint(t, s, id).Tenant; got != want {
				t.Errorf("endpoint %s: tenant %q, want %q", id, got, want)
			}
		}
		const acme2 = "ep_00000000000000000000000003"
		desc := "changed"
		if e, err := s.UpdateEndpoint(ctx, acme2, store.EndpointChange{Description: &desc}, t0.Add(time.Hour)); err != nil || e.Tenant != "acme" {
			t.Errorf("update: tenant %q, error %v; want acme", e.Tenant, err)
		}
		if e, err := s.RotateEndpointSecret(ctx, acme2, secret2, time.Hour, t0.Add(time.Hour)); err != nil || e.Tenant != "acme" {
			t.Errorf("rotate: tenant %q, error %v; want acme", e.Tenant, err)
		}

		list := func(q store.EndpointQuery) []string {
			t.Helper()
			var ids []string
			for pages := 0; ; pages++ {
				if pages > 10 {
					t.Fatal("too many pages")
				}
				page, err := s.ListEndpoints(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range page.Items {
					if !q.AllTenants && e.Tenant != q.Tenant {
						t.Errorf("list of tenant %q holds %s of tenant %q", q.Tenant, e.ID, e.Tenant)
					}
					ids = append(ids, e.ID)
				}
				if q.Cursor = page.Next; q.Cursor == "" {
					return ids
				}
			}
		}
		id := func(i int) string { return fmt.Sprintf("ep_%026d", i) }
		tests := []struct {
			name string
			q    store.EndpointQuery
			want []string
		}{
			{"zero query: the default tenant's", store.EndpointQuery{Limit: 1}, []string{id(4), id(0)}},
			{"one tenant's, across pages", store.EndpointQuery{Tenant: "acme", Limit: 2}, []string{id(5), id(3), id(1)}},
			{"another tenant's", store.EndpointQuery{Tenant: "globex"}, []string{id(2)}},
			{"a tenant with none", store.EndpointQuery{Tenant: "initech"}, nil},
			{"every tenant's", store.EndpointQuery{AllTenants: true, Limit: 4}, []string{id(5), id(4), id(3), id(2), id(1), id(0)}},
		}
		for _, tt := range tests {
			if diff := cmp.Diff(tt.want, list(tt.q)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tt.name, diff)
			}
		}
	})
}

func TestRotateEndpointSecret(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		createEndpoint(t, s, ep1, t0)
		rotated := t0.Add(time.Hour)
		e, err := s.RotateEndpointSecret(ctx, ep1, secret2, 24*time.Hour, rotated)
		if err != nil {
			t.Fatal(err)
		}
		if e.Secret != secret2 || e.PreviousSecret != secret1 || e.PreviousUntil == nil || !e.PreviousUntil.Equal(rotated.Add(24*time.Hour)) {
			t.Fatalf("after rotation: secret %q previous %q until %v", e.Secret.Reveal(), e.PreviousSecret.Reveal(), e.PreviousUntil)
		}
		for _, tc := range []struct {
			at   time.Time
			want []store.Secret
		}{
			{rotated, []store.Secret{secret2, secret1}},
			{rotated.Add(24*time.Hour - time.Microsecond), []store.Secret{secret2, secret1}},
			{rotated.Add(24 * time.Hour), []store.Secret{secret2}},
		} {
			if diff := cmp.Diff(tc.want, endpoint(t, s, ep1).Secrets(tc.at)); diff != "" {
				t.Errorf("secrets at %s (-want +got):\n%s", tc.at, diff)
			}
		}
		// A rotation without grace drops the secret it replaces at once.
		const secret3 = "whsec_c2VjcmV0LXRocmVlLXRocmVlLXRocmVlLXRocmVl"
		e, err = s.RotateEndpointSecret(ctx, ep1, secret3, 0, rotated.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]store.Secret{secret3}, e.Secrets(rotated.Add(time.Minute))); diff != "" {
			t.Errorf("secrets after a rotation without grace (-want +got):\n%s", diff)
		}
		if _, err := s.RotateEndpointSecret(ctx, ep2, secret3, time.Hour, rotated); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("rotate unknown: %v, want ErrNotFound", err)
		}
	})
}

// TestSecretMasked checks that an endpoint printed, logged or encoded by
// mistake does not show its secrets.
func TestSecretMasked(t *testing.T) {
	e := store.Endpoint{ID: ep1, Secret: secret1, PreviousSecret: secret2}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("endpoint", "endpoint", e, "secret", e.Secret)
	encoded, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"%v": fmt.Sprintf("%v", e), "%+v": fmt.Sprintf("%+v", e), "%#v": fmt.Sprintf("%#v", e), "%s": fmt.Sprintf("%s", e.Secret),
		"slog": logged.String(), "json": string(encoded),
	} {
		if strings.Contains(text, "MfKQ9r8") {
			t.Errorf("%s shows a secret: %s", name, text)
		}
		if !strings.Contains(text, "whsec_***") {
			t.Errorf("%s shows no mask: %s", name, text)
		}
	}
	if e.Secret.Reveal() != secret1 {
		t.Errorf("Reveal = %q", e.Secret.Reveal())
	}
}

func TestEndpointCircuit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		createEndpoint(t, s, ep1, t0)
		record := func(c store.CircuitChange) store.Circuit {
			t.Helper()
			got, err := s.RecordCircuit(ctx, ep1, c)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		t1, t2, t3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
		// Two workers record failures: the run started at the first.
		record(store.CircuitChange{State: store.CircuitClosed, Since: t0, LastError: "503", FailingSince: &t1, At: t1})
		got := record(store.CircuitChange{State: store.CircuitOpen, Since: t2, LastError: "timeout", FailingSince: &t2, At: t2})
		want := store.Circuit{State: store.CircuitOpen, Since: &t2, LastError: "timeout", FailingSince: &t1, UpdatedAt: &t2}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("open (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, endpoint(t, s, ep1).Circuit); diff != "" {
			t.Errorf("open, read back (-want +got):\n%s", diff)
		}
		// A worker that saw the run start earlier moves its start back.
		got = record(store.CircuitChange{State: store.CircuitOpen, Since: t2, FailingSince: &t0, At: t2})
		if got.FailingSince == nil || !got.FailingSince.Equal(t0) || got.LastError != "timeout" {
			t.Errorf("earlier start: %+v, want failing since %s and the last error kept", got, t0)
		}
		// A delivery ends the run; the last error stays for the record.
		got = record(store.CircuitChange{State: store.CircuitClosed, Since: t3, At: t3})
		want = store.Circuit{State: store.CircuitClosed, Since: &t3, LastError: "timeout", UpdatedAt: &t3}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("closed (-want +got):\n%s", diff)
		}
		if _, err := s.RecordCircuit(ctx, ep2, store.CircuitChange{State: store.CircuitOpen, Since: t3, At: t3}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("record unknown: %v, want ErrNotFound", err)
		}
		if _, err := s.RecordCircuit(ctx, ep1, store.CircuitChange{State: "ajar", Since: t3, At: t3}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("record bad state: %v, want ErrInvalid", err)
		}
	})
}

func TestDisableEndpoint(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		createEndpoint(t, s, ep1, t0)
		t1, t2, t3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
		if _, err := s.RecordCircuit(ctx, ep1, store.CircuitChange{State: store.CircuitOpen, Since: t1, LastError: "503", FailingSince: &t1, At: t1}); err != nil {
			t.Fatal(err)
		}
		done, err := s.DisableEndpoint(ctx, ep1, "failing for too long", t2)
		if err != nil || !done {
			t.Fatalf("disable: %t, %v", done, err)
		}
		// A second worker finds it disabled: the first reason stays.
		if done, err := s.DisableEndpoint(ctx, ep1, "another reason", t3); err != nil || done {
			t.Fatalf("disable again: %t, %v, want false", done, err)
		}
		e := endpoint(t, s, ep1)
		if e.Enabled || e.DisabledReason != "failing for too long" || e.DisabledAt == nil || !e.DisabledAt.Equal(t2) {
			t.Errorf("disabled: enabled %t, reason %q, at %v", e.Enabled, e.DisabledReason, e.DisabledAt)
		}
		if _, err := s.DisableEndpoint(ctx, ep2, "x", t2); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("disable unknown: %v, want ErrNotFound", err)
		}

		// Re-enabled: the circuit starts afresh, and a worker's view of
		// before that is not recorded.
		on := true
		e, err = s.UpdateEndpoint(ctx, ep1, store.EndpointChange{Enabled: &on}, t3)
		if err != nil {
			t.Fatal(err)
		}
		if !e.Enabled || !e.Reenabled || e.DisabledReason != "" || e.DisabledAt != nil || e.ResetAt == nil || !e.ResetAt.Equal(t3) ||
			e.Circuit.State != store.CircuitClosed || e.Circuit.FailingSince != nil || e.Circuit.LastError != "" {
			t.Errorf("re-enabled: %+v", e)
		}
		got, err := s.RecordCircuit(ctx, ep1, store.CircuitChange{State: store.CircuitOpen, Since: t1, LastError: "stale", FailingSince: &t1, At: t3.Add(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != store.CircuitClosed || got.LastError != "" {
			t.Errorf("stale record was stored: %+v", got)
		}
		// Enabling an enabled endpoint leaves its circuit alone.
		t4 := t3.Add(time.Minute)
		if _, err := s.RecordCircuit(ctx, ep1, store.CircuitChange{State: store.CircuitOpen, Since: t4, LastError: "503", FailingSince: &t4, At: t4}); err != nil {
			t.Fatal(err)
		}
		e, err = s.UpdateEndpoint(ctx, ep1, store.EndpointChange{Enabled: &on}, t4.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if e.Circuit.State != store.CircuitOpen || !e.ResetAt.Equal(t3) || e.Reenabled {
			t.Errorf("enabling an enabled endpoint reset it: %+v", e)
		}
		// Disabled through the API: with the reason given.
		off := false
		e, err = s.UpdateEndpoint(ctx, ep1, store.EndpointChange{Enabled: &off, DisabledReason: "disabled through the API"}, t4.Add(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if e.Enabled || e.Reenabled || e.DisabledReason != "disabled through the API" {
			t.Errorf("disabled through the API: %+v", e)
		}
		// Enabled by several changes at once: one of them enabled it.
		var wg sync.WaitGroup
		var reenabled atomic.Int32
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e, err := s.UpdateEndpoint(ctx, ep1, store.EndpointChange{Enabled: &on}, t4.Add(time.Duration(3+i)*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				if e.Reenabled {
					reenabled.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := reenabled.Load(); n != 1 {
			t.Errorf("%d of 8 changes at once say they enabled the endpoint, want 1", n)
		}
	})
}

// acceptFor accepts notification id with a webhook copy for recipient
// and an email copy, at t0 plus after.
func acceptFor(t *testing.T, s *store.Store, id, recipient string, after time.Duration) {
	t.Helper()
	err := s.Accept(ctxOf(t), []notification.Accepted{{ID: id, CreatedAt: t0.Add(after), Channels: []string{"email", "webhook"},
		Recipients: []string{"ada@example.com", recipient}, Payload: []byte(`{}`)}})
	if err != nil {
		t.Fatalf("accept %s: %v", id, err)
	}
}

// webhookEvents are the events of a webhook copy failing once and
// delivered at the second attempt, after the notification's creation.
func webhookEvents(id string, created time.Duration) []notification.Event {
	e := func(attempt int, outcome retry.Outcome, after time.Duration, opts ...func(*notification.Event)) notification.Event {
		ev := notification.Event{ID: id, Channel: "webhook", Attempt: attempt, Outcome: outcome, At: t0.Add(created + after), Service: "test"}
		for _, o := range opts {
			o(&ev)
		}
		return ev
	}
	return []notification.Event{
		e(1, retry.Failed, time.Second, withErr(s503), withDelay(1000), withDur(20)),
		e(2, retry.Delivered, 2*time.Second, withDur(10)),
		// The email copy is not the endpoint's.
		{ID: id, Channel: "email", Attempt: 1, Outcome: retry.Delivered, At: t0.Add(created + time.Second), Service: "test"},
	}
}

func TestEndpointAttempts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		ctx := ctxOf(t)
		acceptFor(t, s, "ntf_a", ep1, 0)
		acceptFor(t, s, "ntf_b", ep2, time.Minute)
		acceptFor(t, s, "ntf_c", "https://example.com/hook", 2*time.Minute)
		// Events before the accepted record: the notification is known by
		// its endpoint once accepted.
		record(t, s, webhookEvents("ntf_d", 3*time.Minute)...)
		acceptFor(t, s, "ntf_d", ep1, 3*time.Minute)
		for _, id := range []string{"ntf_a", "ntf_b", "ntf_c"} {
			created := map[string]time.Duration{"ntf_a": 0, "ntf_b": time.Minute, "ntf_c": 2 * time.Minute}[id]
			record(t, s, webhookEvents(id, created)...)
		}
		type row struct {
			ID      string
			Attempt int
			Outcome string
			Error   string
		}
		var got []row
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("too many pages")
			}
			page, err := s.EndpointAttempts(ctx, ep1, store.AttemptQuery{Channel: "webhook", Limit: 3, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range page.Items {
				got = append(got, row{a.NotificationID, a.Attempt.N, string(a.Outcome), a.Error})
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		want := []row{
			{"ntf_d", 2, "delivered", ""}, {"ntf_d", 1, "failed", s503},
			{"ntf_a", 2, "delivered", ""}, {"ntf_a", 1, "failed", s503},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("attempts (-want +got):\n%s", diff)
		}
		if _, err := s.EndpointAttempts(ctx, ep1, store.AttemptQuery{Channel: "webhook", Cursor: "bm9wZQ"}); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("bad cursor: %v, want ErrBadCursor", err)
		}

		// Pruned with the notifications.
		if _, err := s.Prune(ctx, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		page, err := s.EndpointAttempts(ctx, ep1, store.AttemptQuery{Channel: "webhook"})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 2 || page.Items[0].NotificationID != "ntf_d" {
			t.Errorf("after prune: %+v, want ntf_d's two attempts", page.Items)
		}
		n, err := store.CountRows(ctx, s, "endpoint_notifications")
		if err != nil || n != 2 {
			t.Errorf("endpoint_notifications: %d rows (%v), want 2 (ntf_b, ntf_d)", n, err)
		}
	})
}

// TestEndpointMigrationBackfill applies the endpoints migration to a
// database that holds notifications already: those naming an endpoint are
// in its log.
func TestEndpointMigrationBackfill(t *testing.T) {
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dsn := storetest.DSN(t, backend)
			s, err := store.Open(ctxOf(t), dsn)
			if err != nil {
				t.Fatal(err)
			}
			acceptFor(t, s, "ntf_a", ep1, 0)
			record(t, s, webhookEvents("ntf_a", 0)...)
			// Back to the schema before the migration.
			undo := []string{
				"DROP TRIGGER notifications_endpoints_insert" + map[string]string{"postgres": " ON notifications"}[backend],
				"DROP TRIGGER notifications_endpoints_update" + map[string]string{"postgres": " ON notifications"}[backend],
				"DROP TABLE endpoint_notifications", "DROP TABLE endpoints",
				"DELETE FROM schema_migrations WHERE name = '0003_endpoints'",
			}
			if backend == storetest.Postgres {
				undo = append(undo, "DROP FUNCTION notifications_endpoints()")
			}
			for _, q := range undo {
				if err := store.Exec(ctxOf(t), s, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			s.Close()
			s, err = store.Open(ctxOf(t), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			page, err := s.EndpointAttempts(ctxOf(t), ep1, store.AttemptQuery{Channel: "webhook"})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Items) != 2 {
				t.Errorf("attempts after the migration: %+v, want 2", page.Items)
			}
		})
	}
}

// TestEndpointAttemptsDeferred: an attempt deferred (a cap, a rate, a
// Retry-After) shows as deferred in the endpoint's delivery log, as in the
// notification's timeline, not as a plain failure.
func TestEndpointAttemptsDeferred(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *store.Store) {
		acceptFor(t, s, "ntf_e", ep1, 0)
		record(t, s,
			notification.Event{ID: "ntf_e", Channel: "webhook", Attempt: 1, Outcome: retry.Failed, At: t0.Add(time.Second), Error: "2 deliveries in flight", Service: "worker"},
			notification.Event{ID: "ntf_e", Channel: "webhook", Attempt: 1, Outcome: retry.Retrying, At: t0.Add(time.Second), DelayMS: 50, Deferred: true, Service: "retrier"},
			notification.Event{ID: "ntf_e", Channel: "webhook", Attempt: 2, Outcome: retry.Delivered, At: t0.Add(2 * time.Second), Service: "worker"})
		page, err := s.EndpointAttempts(ctxOf(t), ep1, store.AttemptQuery{Channel: "webhook"})
		if err != nil {
			t.Fatal(err)
		}
		var deferred []bool
		for _, a := range page.Items {
			deferred = append(deferred, a.Deferred)
		}
		if len(page.Items) != 2 || !slices.Equal(deferred, []bool{false, true}) {
			t.Errorf("attempts %+v, want the delivered one, then the deferred one", page.Items)
		}
	})
}
