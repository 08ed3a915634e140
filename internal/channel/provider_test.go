package channel

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-demo/relay/internal/store"
	"github.com/relay-demo/relay/internal/store/storetest"
	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/webhooks"
)

func TestEmailProvidersConfig(t *testing.T) {
	two := map[string]string{"SMTP_PROVIDERS": "2", "SMTP_1_HOST": "a.example", "SMTP_2_HOST": "b.example"}
	with := func(extra map[string]string) map[string]string {
		env := map[string]string{}
		for k, v := range two {
			env[k] = v
		}
		for k, v := range extra {
			env[k] = v
		}
		return env
	}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string // a part of the error; "" for none
		want    []string
	}{
		{"one server, as before", map[string]string{"SMTP_HOST": "mail.example"}, "", []string{"smtp mail.example:587"}},
		{"two numbered servers", with(map[string]string{"SMTP_2_PORT": "2525", "SMTP_1_NAME": "ses"}), "",
			[]string{"ses a.example:587", "smtp2 b.example:2525"}},
		{"a numbered server without a host", map[string]string{"SMTP_PROVIDERS": "2", "SMTP_1_HOST": "a.example"}, "SMTP_2_HOST is required", nil},
		{"a server beyond the count", with(map[string]string{"SMTP_3_HOST": "c.example"}), "SMTP_3_HOST is set but SMTP_PROVIDERS=2", nil},
		{"numbered servers without the count", map[string]string{"SMTP_1_HOST": "a.example"}, "SMTP_1_HOST is set but SMTP_PROVIDERS=0", nil},
		{"a bad port", with(map[string]string{"SMTP_2_PORT": "99999"}), `SMTP_2_PORT="99999"`, nil},
		{"a bad tls", with(map[string]string{"SMTP_1_TLS": "maybe"}), `SMTP_1_TLS="maybe"`, nil},
		{"a bad timeout", with(map[string]string{"SMTP_2_TIMEOUT": "-1s"}), `SMTP_2_TIMEOUT="-1s"`, nil},
		{"a bad rate", with(map[string]string{"SMTP_2_RATE": "fast"}), `SMTP_2_RATE="fast"`, nil},
		{"a negative rate", with(map[string]string{"SMTP_1_RATE": "-5"}), `SMTP_1_RATE="-5"`, nil},
		{"a burst of 0", with(map[string]string{"SMTP_1_RATE": "5", "SMTP_1_BURST": "0"}), `SMTP_1_BURST="0"`, nil},
		{"the same name twice", with(map[string]string{"SMTP_1_NAME": "x", "SMTP_2_NAME": "x"}), `SMTP_2_NAME="x"`, nil},
		{"a name with a space", with(map[string]string{"SMTP_1_NAME": "my server"}), `SMTP_1_NAME="my server"`, nil},
		{"a bad flag", with(map[string]string{"SMTP_1_PERMANENT_MAY_BE_WRONG": "perhaps"}), `SMTP_1_PERMANENT_MAY_BE_WRONG="perhaps"`, nil},
		{"too many servers", map[string]string{"SMTP_PROVIDERS": "17"}, `SMTP_PROVIDERS="17"`, nil},
		{"a rate of the one server", map[string]string{"SMTP_RATE": "-1"}, `SMTP_RATE="-1"`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			send, closeSend, err := openEmail(getenv, nil)
			if tt.wantErr != "" {
				if err == nil {
					closeSend()
					t.Fatalf("no error, want one with %q", tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "configuration: ") {
					t.Fatalf("error %q, want a configuration error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer closeSend()
			_ = send
			var cfg EmailConfig
			cfg.Name, cfg.Port, cfg.TLS, cfg.Burst = "smtp", 587, "starttls", 1
			cfg.Host = tt.env["SMTP_HOST"]
			if p := tt.env["SMTP_PROVIDERS"]; p == "2" {
				cfg.Providers = 2
			}
			servers, err := smtpServers(getenv, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range servers {
				got = append(got, s.name+" "+s.cfg.Host+":"+strconv.Itoa(s.cfg.Port))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("servers (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeProvider answers each send with the next of its errors (nil once
// they run out) and counts its sends.
type fakeProvider struct {
	errs  []error
	sends int
}

func (f *fakeProvider) send(context.Context, string, *EmailPart) error {
	f.sends++
	if len(f.errs) == 0 {
		return nil
	}
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}

// fakeRates answers every take with wait.
type fakeRates struct{ wait time.Duration }

func (r fakeRates) TakeRate(context.Context, string, string, store.Rate, time.Duration, time.Time) (time.Duration, error) {
	return r.wait, nil
}

func TestFailover(t *testing.T) {
	transient := errors.New("421 try later")
	refused := retry.Permanent(errors.New("550 no such mailbox"))
	tests := []struct {
		name       string
		retries    int
		a, b       []error
		aWrong     bool
		openA      bool // open a's circuit first
		wantErr    string
		permanent  bool
		wantVia    string
		wantAB     [2]int
		wantDeferr bool
	}{
		{"the first provider delivers", 0, nil, nil, false, false, "", false, "a", [2]int{1, 0}, false},
		{"a transient failure says the provider", 0, []error{transient}, nil, false, false, "a: 421 try later", false, "a", [2]int{1, 0}, false},
		{"a retry starts at the next provider", 1, nil, nil, false, false, "", false, "b", [2]int{0, 1}, false},
		{"the second retry is back at the first", 2, nil, nil, false, false, "", false, "a", [2]int{1, 0}, false},
		{"an open circuit is skipped", 0, nil, nil, false, true, "", false, "b", [2]int{0, 1}, false},
		{"a permanent refusal is not tried elsewhere", 0, []error{refused}, nil, false, false, "550", true, "a", [2]int{1, 0}, false},
		{"a provider that may be wrong hands on", 0, []error{refused}, nil, true, false, "", false, "b", [2]int{1, 1}, false},
		{"refused by both, parked", 0, []error{refused}, []error{refused}, true, false, "550", true, "b", [2]int{1, 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := &fakeProvider{errs: tt.a}, &fakeProvider{errs: tt.b}
			f := newFailover("email", []Provider[EmailPart]{{Name: "a", Send: a.send, MayBeWrong: tt.aWrong}, {Name: "b", Send: b.send}},
				1, time.Minute, 4, nil, emailTicket, time.Now)
			defer providerSets.remove(f.stats)
			if tt.openA {
				done, _, err := f.iso.admit(context.Background(), "a", "", nil)
				if err != nil {
					t.Fatal(err)
				}
				done(context.Background(), transient)
			}
			var via Via
			ctx := WithVia(WithRetries(context.Background(), tt.retries), &via)
			err := f.send(ctx, "ntf_1", &EmailPart{To: []string{"ada@example.com"}})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one with %q", err, tt.wantErr)
			}
			if retry.IsPermanent(err) != tt.permanent {
				t.Errorf("permanent %v, want %v", retry.IsPermanent(err), tt.permanent)
			}
			if got := [2]int{a.sends, b.sends}; got != tt.wantAB {
				t.Errorf("sends through a and b %v, want %v", got, tt.wantAB)
			}
			if via.Name() != tt.wantVia {
				t.Errorf("via %q, want %q", via.Name(), tt.wantVia)
			}
		})
	}
}

func TestFailoverEveryCircuitOpen(t *testing.T) {
	a := &fakeProvider{}
	f := newFailover("email", []Provider[EmailPart]{{Name: "a", Send: a.send}}, 1, time.Minute, 4, nil, emailTicket, time.Now)
	defer providerSets.remove(f.stats)
	done, _, _ := f.iso.admit(context.Background(), "a", "", nil)
	done(context.Background(), errors.New("down"))
	err := f.send(context.Background(), "ntf_1", &EmailPart{To: []string{"ada@example.com"}})
	wait, ok := retry.RetryAfter(err)
	if !ok || wait <= 0 || a.sends != 0 {
		t.Fatalf("error %v (wait %v), %d sends: want a deferral and no send", err, wait, a.sends)
	}
	if got := Providers(); len(got) == 0 || got[len(got)-1].Circuit != "open" {
		t.Errorf("providers %+v, want a's circuit open", got)
	}
}

func TestFailoverOverTheLimit(t *testing.T) {
	tests := []struct {
		name      string
		wait      time.Duration
		wantSends int
		wantAfter time.Duration
	}{
		{"a slot now", 0, 1, 0},
		{"a slot within the hold is waited for", 20 * time.Millisecond, 1, 0},
		{"a later slot defers, to come back ahead of it", 3 * time.Second, 0, 3*time.Second - rateHold},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &fakeProvider{}
			rates := func(context.Context) (rateTaker, error) { return fakeRates{tt.wait}, nil }
			f := newFailover("email", []Provider[EmailPart]{{Name: "a", Send: a.send, Rate: &store.Rate{Per: 1, Burst: 1}}},
				0, time.Minute, 4, rates, emailTicket, time.Now)
			defer providerSets.remove(f.stats)
			err := f.send(context.Background(), "ntf_1", &EmailPart{To: []string{"ada@example.com"}})
			after, _ := retry.RetryAfter(err)
			if a.sends != tt.wantSends || after != tt.wantAfter || retry.IsPermanent(err) {
				t.Errorf("%d sends, error %v (after %v): want %d sends, after %v", a.sends, err, after, tt.wantSends, tt.wantAfter)
			}
		})
	}
}

func TestOneProviderNamesNone(t *testing.T) {
	a := &fakeProvider{errs: []error{errors.New("421 try later")}}
	f := newFailover("email", []Provider[EmailPart]{{Name: "smtp", Send: a.send}}, 0, time.Minute, 4, nil, emailTicket, time.Now)
	defer providerSets.remove(f.stats)
	var via Via
	err := f.send(WithVia(context.Background(), &via), "ntf_1", &EmailPart{To: []string{"ada@example.com"}})
	if err == nil || err.Error() != "421 try later" || via.Name() != "" {
		t.Errorf("error %v, via %q: want the server's error as it was, and no provider named", err, via.Name())
	}
}

func TestSMSGateways(t *testing.T) {
	var hits [2]int
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits[0]++
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits[1]++
	}))
	defer up.Close()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	hookSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("webhook-key-webhook-key-webhook!"))
	base := map[string]string{"SMS_SECRET": secret, "WEBHOOK_SECRET": hookSecret, "WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8", "SMS_PROVIDERS": "2",
		"SMS_1_URL": down.URL + "/send", "SMS_2_URL": up.URL + "/send", "SMS_2_NAME": "backup"}
	env := func(extra map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := extra[k]; ok {
				return v
			}
			return base[k]
		}
	}

	send, closeSend, err := openSMS(env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSend()
	part := &SMSPart{To: "+15551234567", Text: "hi"}
	var via Via
	err = send(WithVia(context.Background(), &via), "ntf_1", part)
	if err == nil || !strings.HasPrefix(err.Error(), "sms1: ") || retry.IsPermanent(err) || via.Name() != "sms1" {
		t.Fatalf("first attempt: error %v via %q, want sms1's transient failure", err, via.Name())
	}
	err = send(WithVia(WithRetries(context.Background(), 1), &via), "ntf_1", part)
	if err != nil || via.Name() != "backup" || hits != [2]int{1, 1} {
		t.Fatalf("the retry: error %v via %q, hits %v: want it delivered by the backup", err, via.Name(), hits)
	}

	for _, tt := range []struct {
		name    string
		extra   map[string]string
		wantErr string
	}{
		{"no gateway at all", map[string]string{"SMS_PROVIDERS": "0", "SMS_1_URL": "", "SMS_2_URL": ""}, "SMS_URL is required"},
		{"a numbered gateway without a URL", map[string]string{"SMS_2_URL": ""}, "SMS_2_URL is required"},
		{"a gateway beyond the count", map[string]string{"SMS_3_URL": up.URL}, "SMS_3_URL is set but SMS_PROVIDERS=2"},
		{"a URL that is not http", map[string]string{"SMS_1_URL": "ftp://x"}, `SMS_1_URL="ftp://x"`},
		{"a bad secret", map[string]string{"SMS_2_SECRET": "nope"}, `SMS_2_SECRET="***"`},
		{"no secret", map[string]string{"SMS_SECRET": ""}, "SMS_1_SECRET (or SMS_SECRET, for every gateway) is required"},
		{"the webhook secret", map[string]string{"SMS_SECRET": hookSecret}, "SMS_SECRET is the same key as WEBHOOK_SECRET"},
		{"the webhook secret written another way", map[string]string{"WEBHOOK_SECRET": strings.TrimRight(strings.TrimPrefix(secret, "whsec_"), "=")},
			"SMS_SECRET is the same key as WEBHOOK_SECRET"},
		{"a gateway's own secret is the webhook secret", map[string]string{"SMS_2_SECRET": hookSecret}, "SMS_2_SECRET is the same key as WEBHOOK_SECRET"},
		{"one gateway, no secret", map[string]string{"SMS_PROVIDERS": "0", "SMS_URL": up.URL, "SMS_1_URL": "", "SMS_2_URL": "", "SMS_SECRET": ""}, "SMS_SECRET is required"},
		{"one gateway, the webhook secret", map[string]string{"SMS_PROVIDERS": "0", "SMS_URL": up.URL, "SMS_1_URL": "", "SMS_2_URL": "", "SMS_SECRET": hookSecret},
			"SMS_SECRET is the same key as WEBHOOK_SECRET"},
		{"a bad rate", map[string]string{"SMS_1_RATE": "-1"}, `SMS_1_RATE="-1"`},
		{"the same name twice", map[string]string{"SMS_1_NAME": "backup"}, `SMS_2_NAME="backup"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, closeSend, err := openSMS(env(tt.extra), nil)
			if err == nil {
				closeSend()
				t.Fatalf("no error, want one with %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "configuration: ") {
				t.Errorf("error %q, want a configuration error with %q", err, tt.wantErr)
			}
		})
	}
}

func TestProviderMetrics(t *testing.T) {
	a, b := &fakeProvider{errs: []error{errors.New("421 try later")}}, &fakeProvider{}
	f := newFailover("email", []Provider[EmailPart]{{Name: "a", Send: a.send, Rate: &store.Rate{Per: 5, Burst: 1}}, {Name: "b", Send: b.send}},
		1, time.Minute, 4, func(context.Context) (rateTaker, error) { return fakeRates{}, nil }, emailTicket, time.Now)
	defer providerSets.remove(f.stats)
	_ = f.send(context.Background(), "ntf_1", &EmailPart{To: []string{"ada@example.com"}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(ProviderMetrics{})
	var circuitA, failedA, rateA float64
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case mf.GetName() == "relay_provider_circuit" && labels["provider"] == "a" && labels["state"] == "open":
				circuitA = m.GetGauge().GetValue()
			case mf.GetName() == "relay_provider_sends_total" && labels["provider"] == "a" && labels["outcome"] == "failed":
				failedA = m.GetCounter().GetValue()
			case mf.GetName() == "relay_provider_rate_limit" && labels["provider"] == "a":
				rateA = m.GetGauge().GetValue()
			}
		}
	}
	if circuitA != 1 || failedA != 1 || rateA != 5 {
		t.Errorf("a's circuit open %v, failed sends %v, rate %v: want 1 and 1 after one failure with a breaker of 1, and 5", circuitA, failedA, rateA)
	}
}

// TestFailoverSharesCircuits: the providers are declared in the store
// at start, and each change of a circuit is recorded there, for every
// replica and the API to see.
func TestFailoverSharesCircuits(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	a, b := &fakeProvider{errs: []error{errors.New("421 busy")}}, &fakeProvider{}
	rates := func(context.Context) (rateTaker, error) { return st, nil }
	f := newFailover("email", []Provider[EmailPart]{{Name: "a", Send: a.send}, {Name: "b", Send: b.send, Rate: &store.Rate{Per: 50, Burst: 5}}},
		1, time.Minute, 4, rates, emailTicket, time.Now)
	defer providerSets.remove(f.stats)
	stop := f.declare()
	defer stop()
	var got []store.Provider
	for deadline := time.Now().Add(10 * time.Second); len(got) < 2 && time.Now().Before(deadline); {
		var err error
		if got, err = st.Providers(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched()
	}
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" || got[1].Rate == nil || got[1].Rate.Per != 50 || got[0].Circuit.State != store.CircuitClosed {
		t.Fatalf("declared %+v, want a then b (50/s), closed", got)
	}

	// a fails once, which opens its circuit (one failure opens it here);
	// the retry goes through b.
	if err := f.send(ctx, "ntf_1", &EmailPart{To: []string{"ada@example.com"}}); err == nil {
		t.Fatal("a's failure returned no error")
	}
	if err := f.send(WithRetries(ctx, 1), "ntf_1", &EmailPart{To: []string{"ada@example.com"}}); err != nil {
		t.Fatal(err)
	}
	got, err := st.Providers(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if c := got[0].Circuit; c.State != store.CircuitOpen || !strings.Contains(c.LastError, "421 busy") || c.Since == nil || c.FailingSince == nil {
		t.Errorf("a's circuit %+v, want open since now, with its last error", c)
	}
	if c := got[1].Circuit; c.State != store.CircuitClosed || c.UpdatedAt != nil {
		t.Errorf("b's circuit %+v, want closed, never recorded", c)
	}

	// A worker started afresh, its own circuits closed, finds a back up:
	// its first send through a records the circuit closed, whoever
	// opened it.
	fresh := newFailover("email", []Provider[EmailPart]{{Name: "a", Send: (&fakeProvider{}).send}, {Name: "b", Send: b.send}},
		1, time.Minute, 4, rates, emailTicket, time.Now)
	defer providerSets.remove(fresh.stats)
	if fresh.recorder(ctx) == nil { // as declare does at start
		t.Fatal("the fresh worker found no store")
	}
	if err := fresh.send(ctx, "ntf_2", &EmailPart{To: []string{"ada@example.com"}}); err != nil {
		t.Fatal(err)
	}
	got, err = st.Providers(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if c := got[0].Circuit; c.State != store.CircuitClosed || c.FailingSince != nil {
		t.Errorf("a's circuit after a send through it %+v, want closed, failing no more", c)
	}
	// b's circuit was never recorded: a send through it records nothing.
	if err := fresh.send(WithRetries(ctx, 1), "ntf_3", &EmailPart{To: []string{"ada@example.com"}}); err != nil {
		t.Fatal(err)
	}
	if got, err = st.Providers(ctx, time.Now()); err != nil || got[1].Circuit.UpdatedAt != nil {
		t.Errorf("b's circuit %+v (%v), want never recorded", got[1].Circuit, err)
	}
}

// TestSMSGatewayKeyIsItsOwn plays the replay of the third probe: a
// receiver of bare webhook URLs holds WEBHOOK_SECRET, so a request signed
// with it (a bare webhook whose payload is {"to", "text"}, sent to the
// attacker's own URL) must not pass for a gateway request. The gateway's
// requests verify with SMS_SECRET only, and their signed body says they
// are SMS requests.
func TestSMSGatewayKeyIsItsOwn(t *testing.T) {
	smsSecret, hookSecret := webhooks.NewSecret(), webhooks.NewSecret()
	type request struct {
		header http.Header
		body   []byte
	}
	got := make(chan request, 2)
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- request{r.Header.Clone(), body}
	}))
	defer gateway.Close()
	env := map[string]string{"SMS_SECRET": smsSecret, "WEBHOOK_SECRET": hookSecret, "WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8", "SMS_URL": gateway.URL + "/send"}
	send, closeSend, err := openSMS(func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSend()
	if err := send(context.Background(), "ntf_1", &SMSPart{To: "+15551234567", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	sms := <-got

	// The bare webhook an attacker has relay send to its own URL.
	bare := webhooks.NewSender(webhooks.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, mustSigner(t, hookSecret))
	if _, err := bare.Send(context.Background(), webhooks.Request{URL: gateway.URL + "/send", ID: "ntf_2", Payload: json.RawMessage(`{"to":"+15551234567","text":"hi"}`)}); err != nil {
		t.Fatal(err)
	}
	replayed := <-got

	now := time.Now()
	gatewayKey, webhookKey := mustSigner(t, smsSecret), mustSigner(t, hookSecret)
	if err := gatewayKey.Verify(sms.header, sms.body, now); err != nil {
		t.Errorf("the gateway's request does not verify with SMS_SECRET: %v", err)
	}
	if err := webhookKey.Verify(sms.header, sms.body, now); err == nil {
		t.Error("the gateway's request verifies with WEBHOOK_SECRET: any webhook receiver could forge it")
	}
	if err := gatewayKey.Verify(replayed.header, replayed.body, now); err == nil {
		t.Error("a bare webhook replayed to the gateway verifies with SMS_SECRET")
	}
	var body struct{ Type, To, Text string }
	if err := json.Unmarshal(sms.body, &body); err != nil || body.Type != GatewayRequestType || body.To != "+15551234567" || body.Text != "hi" {
		t.Errorf("the gateway's body %s, want type %q, to and text", sms.body, GatewayRequestType)
	}
}

func mustSigner(t *testing.T, secret string) *webhooks.Signer {
	t.Helper()
	s, err := webhooks.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
