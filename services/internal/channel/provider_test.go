package channel

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/retry"
	"github.com/relay-demo/relay/services/internal/history"
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
		{"a limit needs a store", map[string]string{"SMTP_RATE": "5", "DATA_DIR": " "}, `DATA_DIR=" "`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			send, closeSend, err := openEmail(getenv)
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

func (r fakeRates) TakeRate(context.Context, string, string, history.Rate, time.Duration, time.Time) (time.Duration, error) {
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
				done, _, err := f.iso.admit(context.Background(), "a", nil)
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
	done, _, _ := f.iso.admit(context.Background(), "a", nil)
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
			f := newFailover("email", []Provider[EmailPart]{{Name: "a", Send: a.send, Rate: &history.Rate{Per: 1, Burst: 1}}},
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
