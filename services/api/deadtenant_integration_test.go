//go:build integration

package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/cmd/relay/dead"
	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/retry/retrytest"
	"github.com/relay-demo/relay/services/api"
)

const (
	acmeToken     = "integration-acme-token-0123456789"
	globexToken   = "integration-globex-token-0123456789"
	operatorToken = "integration-operator-token-0123456789"
)

// startTenantAPI is startAPI with two named tenants, acme and globex,
// and an operator, besides the default tenant's deadLetterToken.
func startTenantAPI(t *testing.T) *apiProcess {
	t.Helper()
	return startAPIWith(t, deadLetterToken, map[string]string{
		"API_TENANT_TOKENS":   "acme:" + acmeToken + ",globex:" + globexToken,
		"API_OPERATOR_TOKENS": operatorToken,
	}, nil)
}

// parkTenant publishes a parked copy of id from the email queue into the
// dead-letter exchange of topo, carrying tenant in x-tenant (none for
// the default tenant), as the API's copies do.
func parkTenant(t *testing.T, conn *amqp.Connection, topo retry.Topology, id, tenant string) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	h := amqp.Table{retry.HeaderDeadSource: topo.Name("email-queue"), retry.HeaderDeadReason: retry.ReasonMaxRetries,
		retry.HeaderParkedAt: time.Now().UTC().Format(time.RFC3339Nano), retry.HeaderLastError: "503 busy"}
	if tenant != "" {
		h[notification.HeaderTenant] = tenant
	}
	if err := ch.Publish(topo.Name(retry.DeadExchange), "", false, false, amqp.Publishing{
		MessageId: id, ContentType: "application/json", Body: []byte(`{}`), DeliveryMode: amqp.Persistent, Headers: h,
	}); err != nil {
		t.Fatal(err)
	}
}

// listed is the id and tenant of each parked copy GET /v1/dead-letters
// (with query) answers token, as "id" or "id@tenant", sorted.
func (p *apiProcess) listed(t *testing.T, token, query string) []string {
	t.Helper()
	status, body := p.doAs(t, token, http.MethodGet, "/v1/dead-letters"+query, "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/dead-letters%s: %d %s", query, status, body)
	}
	var answer struct {
		DeadLetters []struct {
			ID     string  `json:"id"`
			Tenant *string `json:"tenant"`
		} `json:"dead_letters"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, d := range answer.DeadLetters {
		switch {
		case d.Tenant == nil:
			out = append(out, d.ID)
		case *d.Tenant == "":
			t.Errorf("%s shows an empty tenant: the default tenant's is left out", d.ID)
		default:
			out = append(out, d.ID+"@"+*d.Tenant)
		}
	}
	slices.Sort(out)
	return out
}

// TestDeadLettersAreTheirTenantsOnTheBroker runs the dead-letter routes of
// the real `relay api` with a tenant's, another tenant's, the default
// tenant's and an operator's tokens over copies of each parked on the
// broker: no tenant lists, reads, replays, deletes or purges another's,
// and an operator sees and selects every tenant.
func TestDeadLettersAreTheirTenantsOnTheBroker(t *testing.T) {
	p := startTenantAPI(t)
	for _, c := range [][2]string{{"d1", ""}, {"a1", "acme"}, {"a2", "acme"}, {"g1", "globex"}} {
		parkTenant(t, p.conn, p.topo, c[0], c[1])
	}
	if !poll(defaultWait, func() bool { return p.depth(t, retry.DeadQueue) == 4 }) {
		t.Fatalf("not parked: %d", p.depth(t, retry.DeadQueue))
	}

	lists := []struct {
		token, query string
		want         []string
	}{
		{acmeToken, "", []string{"a1@acme", "a2@acme"}},
		{globexToken, "", []string{"g1@globex"}},
		{deadLetterToken, "", []string{"d1"}},
		{globexToken, "?id=a1", []string{}},
		{operatorToken, "", []string{"a1@acme", "a2@acme", "d1", "g1@globex"}},
		{operatorToken, "?tenant=acme", []string{"a1@acme", "a2@acme"}},
		{operatorToken, "?tenant=default", []string{"d1"}},
	}
	for _, l := range lists {
		if diff := cmp.Diff(l.want, p.listed(t, l.token, l.query)); diff != "" {
			t.Errorf("list%s as %s (-want +got):\n%s", l.query, l.token[:16], diff)
		}
	}
	if status, body := p.doAs(t, globexToken, http.MethodGet, "/v1/dead-letters?tenant=acme", ""); status != http.StatusUnprocessableEntity {
		t.Errorf("a tenant naming another: %d %s", status, body)
	}

	// Another tenant's id answers as an id nothing matches, word for word.
	_, unknown := p.doAs(t, globexToken, http.MethodGet, "/v1/dead-letters/zz", "")
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1/dead-letters/a1"},
		{http.MethodPost, "/v1/dead-letters/a1/replay"},
		{http.MethodDelete, "/v1/dead-letters/a1"},
		{http.MethodGet, "/v1/dead-letters/d1"},
	} {
		status, body := p.doAs(t, globexToken, r.method, r.path, "")
		id := strings.Split(r.path, "/")[3]
		if want := strings.ReplaceAll(string(unknown), `\"zz\"`, `\"`+id+`\"`); status != http.StatusNotFound || string(body) != want {
			t.Errorf("%s %s as globex = %d %s, want 404 %s", r.method, r.path, status, body, want)
		}
	}
	if status, body := p.doAs(t, acmeToken, http.MethodGet, "/v1/dead-letters/a1", ""); status != http.StatusOK || !strings.Contains(string(body), `"tenant":"acme"`) {
		t.Errorf("acme reading its own: %d %s", status, body)
	}

	// globex's purge of all takes g1 and nothing else.
	if status, body := p.doAs(t, globexToken, http.MethodPost, "/v1/dead-letters/purge", `{"all":true,"confirm":true}`); status != http.StatusOK || string(body) != `{"purged":1}`+"\n" {
		t.Errorf("globex's purge of all: %d %s", status, body)
	}
	if diff := cmp.Diff([]string{"a1@acme", "a2@acme", "d1"}, p.listed(t, operatorToken, "")); diff != "" {
		t.Errorf("parked after globex's purge (-want +got):\n%s", diff)
	}
	// acme's replay of all brings back a1 and a2 only.
	if status, body := p.doAs(t, acmeToken, http.MethodPost, "/v1/dead-letters/replay", `{"all":true}`); status != http.StatusOK || string(body) != `{"replayed":2}`+"\n" {
		t.Errorf("acme's replay of all: %d %s", status, body)
	}
	if diff := cmp.Diff(map[string]int{"a1": 1, "a2": 1}, retrytest.TakeAll(t, p.conn, p.topo.Name("email-queue"))); diff != "" {
		t.Errorf("replayed onto the email queue (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"d1"}, p.listed(t, operatorToken, "")); diff != "" {
		t.Errorf("parked after acme's replay (-want +got):\n%s", diff)
	}
	// An operator's purge of one tenant takes that tenant's only.
	parkTenant(t, p.conn, p.topo, "a3", "acme")
	if !poll(defaultWait, func() bool { return p.depth(t, retry.DeadQueue) == 2 }) {
		t.Fatalf("a3 not parked: %d", p.depth(t, retry.DeadQueue))
	}
	if status, body := p.doAs(t, operatorToken, http.MethodPost, "/v1/dead-letters/purge", `{"tenant":"default","confirm":true}`); status != http.StatusOK || string(body) != `{"purged":1}`+"\n" {
		t.Errorf("the operator's purge of the default tenant: %d %s", status, body)
	}
	if diff := cmp.Diff([]string{"a3@acme"}, p.listed(t, operatorToken, "")); diff != "" {
		t.Errorf("parked after the operator's purge (-want +got):\n%s", diff)
	}

	// relay dead --tenant is the operator's selection, through the API.
	parkTenant(t, p.conn, p.topo, "g3", "globex")
	if !poll(defaultWait, func() bool { return p.depth(t, retry.DeadQueue) == 2 }) {
		t.Fatalf("g3 not parked: %d", p.depth(t, retry.DeadQueue))
	}
	relayDead := func(token string, args ...string) (string, error) {
		env := map[string]string{"RELAY_API": p.base, "API_TOKENS": token}
		var out bytes.Buffer
		err := dead.Run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(""), &out)
		return out.String(), err
	}
	out, err := relayDead(operatorToken, "list", "--json", "--tenant", "globex")
	if err != nil || !strings.Contains(out, `"id":"g3"`) || !strings.Contains(out, `"tenant":"globex"`) || strings.Contains(out, "a3") {
		t.Errorf("relay dead list --tenant globex as the operator: %v\n%s", err, out)
	}
	if out, err := relayDead(acmeToken, "list", "--tenant", "globex"); err == nil || !strings.Contains(err.Error(), "only an operator's token may choose a tenant") {
		t.Errorf("relay dead list --tenant globex as acme: %v\n%s", err, out)
	}
	if out, err := relayDead(acmeToken, "purge", "--all", "--yes"); err != nil || !strings.Contains(out, "purged 1 message(s)") {
		t.Errorf("relay dead purge --all as acme: %v\n%s", err, out)
	}
	if diff := cmp.Diff([]string{"g3@globex"}, p.listed(t, operatorToken, "")); diff != "" {
		t.Errorf("parked after acme's relay dead purge --all (-want +got):\n%s", diff)
	}
}

// TestDeadLetterJobsAreTheirTenantsOnTheBroker runs jobs through the real
// `relay api`: a tenant's purge job of all takes its own tenant's copies
// only, and another tenant can neither read nor cancel the job.
func TestDeadLetterJobsAreTheirTenantsOnTheBroker(t *testing.T) {
	p := startTenantAPI(t)
	for _, c := range [][2]string{{"d1", ""}, {"a1", "acme"}, {"g1", "globex"}, {"g2", "globex"}} {
		parkTenant(t, p.conn, p.topo, c[0], c[1])
	}
	if !poll(defaultWait, func() bool { return p.depth(t, retry.DeadQueue) == 4 }) {
		t.Fatalf("not parked: %d", p.depth(t, retry.DeadQueue))
	}
	status, body := p.doAs(t, globexToken, http.MethodPost, "/v1/dead-letters/jobs", `{"action":"purge","all":true,"confirm":true}`)
	var started jobAnswer
	if status != http.StatusAccepted || json.Unmarshal(body, &started) != nil {
		t.Fatalf("POST jobs as globex: %d %s", status, body)
	}
	var last jobAnswer
	if !poll(30*time.Second, func() bool {
		status, body := p.doAs(t, globexToken, http.MethodGet, "/v1/dead-letters/jobs/"+started.ID, "")
		if status != http.StatusOK || json.Unmarshal(body, &last) != nil {
			t.Fatalf("GET job as globex: %d %s", status, body)
		}
		return last.State != "running"
	}) {
		t.Fatalf("the job never ended: %+v", last)
	}
	if diff := cmp.Diff(jobAnswer{ID: started.ID, State: "done", Matched: 2, Done: 2}, last); diff != "" {
		t.Errorf("globex's job (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a1@acme", "d1"}, p.listed(t, operatorToken, "")); diff != "" {
		t.Errorf("parked after globex's job (-want +got):\n%s", diff)
	}

	_, unknown := p.doAs(t, acmeToken, http.MethodGet, "/v1/dead-letters/jobs/job_nope", "")
	want := strings.ReplaceAll(string(unknown), "job_nope", started.ID)
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		for _, token := range []string{acmeToken, deadLetterToken} {
			if status, body := p.doAs(t, token, method, "/v1/dead-letters/jobs/"+started.ID, ""); status != http.StatusNotFound || string(body) != want {
				t.Errorf("%s of globex's job as %s: %d %s, want 404 %s", method, token[:16], status, body, want)
			}
		}
	}
	if status, body := p.doAs(t, operatorToken, http.MethodGet, "/v1/dead-letters/jobs/"+started.ID, ""); status != http.StatusOK || !strings.Contains(string(body), `"tenant":"globex"`) {
		t.Errorf("the operator reading globex's job: %d %s", status, body)
	}

	// An operator's job over one tenant is that tenant's.
	status, body = p.doAs(t, operatorToken, http.MethodPost, "/v1/dead-letters/jobs", `{"action":"replay","tenant":"acme"}`)
	if status != http.StatusAccepted || json.Unmarshal(body, &started) != nil {
		t.Fatalf("POST jobs as the operator: %d %s", status, body)
	}
	if !poll(30*time.Second, func() bool {
		_, body := p.doAs(t, acmeToken, http.MethodGet, "/v1/dead-letters/jobs/"+started.ID, "")
		return json.Unmarshal(body, &last) == nil && last.State == "done"
	}) {
		t.Fatalf("the operator's job never ended, as acme sees it: %+v", last)
	}
	if diff := cmp.Diff(map[string]int{"a1": 1}, retrytest.TakeAll(t, p.conn, p.topo.Name("email-queue"))); diff != "" {
		t.Errorf("replayed onto the email queue (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"d1"}, p.listed(t, operatorToken, "")); diff != "" {
		t.Errorf("parked after the operator's job (-want +got):\n%s", diff)
	}
}

// TestDeadLetterJobResumedKeepsItsTenant takes over, in a second process,
// a tenant's purge of all whose first process died: it purges that
// tenant's copies and no other's.
func TestDeadLetterJobResumedKeepsItsTenant(t *testing.T) {
	for _, backend := range storetest.Backends() {
		t.Run(backend, func(t *testing.T) {
			conn := retrytest.Conn(t)
			topo := retrytest.Declare(t, conn, retry.Topology{Backend: retry.TTL, Routes: channel.Routes()})
			st := storetest.Open(t, backend)
			for _, c := range [][2]string{{"d1", ""}, {"a1", "acme"}, {"a2", "acme"}, {"g1", "globex"}} {
				parkTenant(t, conn, topo, c[0], c[1])
			}
			retrytest.Eventually(t, defaultWait, func() bool { return retrytest.Depth(t, conn, topo.Name(retry.DeadQueue)) == 4 }, "not parked")

			// The job as acme's process stored it, its lease lapsed.
			ctx := context.Background()
			past := time.Now().Add(-time.Minute)
			if err := st.CreateDeadLetterJob(ctx, store.DeadLetterJob{ID: "job_acme", Action: "purge", Selection: []byte(`{"all":true}`),
				CreatedAt: past, LeaseOwner: "gone#1", LeaseUntil: past, Tenant: "acme"}); err != nil {
				t.Fatal(err)
			}
			b := &api.DeadLetterJobs{Store: st, Topology: topo, Owner: "b", Lease: time.Second,
				Dial: func() (retry.DeadLetters, func(), error) {
					return retry.DeadLetters{Conn: conn, Topology: topo}, func() {}, nil
				}}
			runCtx, cancel := context.WithCancel(ctx)
			ran := make(chan struct{})
			go func() { b.Run(runCtx); close(ran) }()
			defer func() { cancel(); <-ran }()
			var j store.DeadLetterJob
			var err error
			retrytest.Eventually(t, 30*time.Second, func() bool {
				j, err = st.DeadLetterJob(ctx, "job_acme")
				return err == nil && j.State != store.JobRunning
			}, "the job never ended")
			if j.State != store.JobDone || j.Done != 2 || j.Takeovers != 1 || j.Tenant != "acme" || j.AllTenants {
				t.Errorf("the job: %+v", j)
			}
			retrytest.Eventually(t, defaultWait, func() bool { return retrytest.Depth(t, conn, topo.Name(retry.DeadQueue)) == 2 },
				"parked after the job: %d, want d1 and g1", retrytest.Depth(t, conn, topo.Name(retry.DeadQueue)))
			left, err := retry.DeadLetters{Conn: conn, Topology: topo}.List(ctx, retry.Filter{}, 0)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, d := range left {
				ids = append(ids, d.ID)
			}
			slices.Sort(ids)
			if diff := cmp.Diff([]string{"d1", "g1"}, ids); diff != "" {
				t.Errorf("parked after the job (-want +got):\n%s", diff)
			}
		})
	}
}
