package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMasked(t *testing.T) {
	type cfg struct {
		URL     string `env:"AMQP_URL"`
		Hook    string `env:"SMS_URL"`
		Token   string `env:"API_TOKEN" secret:"true"`
		Unset   string `env:"OTHER_TOKEN" secret:"true"`
		Mirror  string `env:"MIRROR"`
		Plain   string `env:"QUEUE_TYPE"`
		Count   int    `env:"PREFETCH"`
		ignored string
	}
	tests := []struct {
		name string
		url  string
		want string
	}{
		{"password", "amqp://guest:s3cret@localhost:5672/", "amqp://guest:***@localhost:5672/"},
		{"no password", "amqp://localhost:5672/", "amqp://localhost:5672/"},
		{"bad escape", "amqp://guest:s3cr%t@localhost:5672/", "amqp://***"},
		{"space", "amqp://user:pa ss@host", "amqp://***"},
		{"no colon after scheme", "amqp//user:secret@host", "***"},
		{"no scheme", "notaurl-secret", "***"},
		{"unset", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg{URL: tt.url, Hook: "https://sms.example.com/send", Token: "tok", Mirror: tt.url, Plain: "classic", Count: 8, ignored: "x"}
			want := []any{"AMQP_URL", tt.want, "SMS_URL", "https://sms.example.com/send", "API_TOKEN", "***", "OTHER_TOKEN", "",
				"MIRROR", tt.url, "QUEUE_TYPE", "classic", "PREFETCH", "8"}
			// A variable not named *_URL is masked only if it holds a URL.
			if strings.Contains(tt.url, "://") {
				want[9] = tt.want
			}
			if diff := cmp.Diff(want, Masked(c)); diff != "" {
				t.Errorf("Masked (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMaskedNested checks that a nested struct's variables, such as an
// embedded config.Broker's, are masked like the others.
func TestMaskedNested(t *testing.T) {
	type inner struct {
		URL string `env:"AMQP_URL"`
	}
	type outer struct {
		Inner inner
		Name  string `env:"NAME"`
	}
	got := Masked(outer{Inner: inner{URL: "amqp//guest:s3cret@host"}, Name: "n"})
	if diff := cmp.Diff([]any{"AMQP_URL", "***", "NAME", "n"}, got); diff != "" {
		t.Errorf("Masked (-want +got):\n%s", diff)
	}
}

func TestParseErrorMasksValues(t *testing.T) {
	type cfg struct {
		URL    int    `env:"BROKER_URL" help:"a number, for the test"`
		Secret int    `env:"PIN" secret:"true" help:"a number"`
		Plain  int    `env:"PREFETCH" help:"a number"`
		Name   string `env:"NAME"`
	}
	tests := []struct {
		name   string
		env    map[string]string
		want   string
		hidden string
	}{
		{"url", map[string]string{"BROKER_URL": "amqp://guest:s3cret@host/"}, `BROKER_URL="amqp://guest:***@host/"`, "s3cret"},
		{"malformed url", map[string]string{"BROKER_URL": "amqp://guest:s3cr%t@host/"}, `BROKER_URL="amqp://***"`, "s3cr"},
		{"no scheme", map[string]string{"BROKER_URL": "s3cret"}, `BROKER_URL="***"`, "s3cret"},
		{"secret", map[string]string{"PIN": "s3cret"}, `PIN="***"`, "s3cret"},
		{"plain", map[string]string{"PREFETCH": "many"}, `PREFETCH="many"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Parse(func(k string) string { return tt.env[k] }, &cfg{})
			if err == nil {
				t.Fatal("Parse = nil, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse error = %q, want it to contain %q", err, tt.want)
			}
			if tt.hidden != "" && strings.Contains(err.Error(), tt.hidden) {
				t.Errorf("Parse error = %q, which shows %q", err, tt.hidden)
			}
		})
	}
}

func ExampleMasked() {
	type cfg struct {
		AMQPURL string `env:"AMQP_URL"`
		Secret  string `env:"WEBHOOK_SECRET" secret:"true"`
	}
	fmt.Println(Masked(cfg{AMQPURL: "amqp://guest:guest@localhost:5672/", Secret: "whsec_x"}))
	fmt.Println(Masked(cfg{AMQPURL: "amqp://guest:gu%st@localhost:5672/"}))
	// Output:
	// [AMQP_URL amqp://guest:***@localhost:5672/ WEBHOOK_SECRET ***]
	// [AMQP_URL amqp://*** WEBHOOK_SECRET ]
}

// TestMaskedDerived checks that the start-up log shows what a setting left
// at a "derived" zero stands for, masked like any other value, and the
// value itself once it is set.
func TestMaskedDerived(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want map[string]string
	}{
		{"defaults", nil, map[string]string{
			"RETRY_MAX": "4", "RETRY_DELAYS": "500ms,5s,1m,5m", "MANAGEMENT_URL": "http://guest:***@localhost:15672"}},
		{"schedule set", map[string]string{"RETRY_DELAYS": "1s,2s"}, map[string]string{
			"RETRY_MAX": "2", "RETRY_DELAYS": "1s,2s"}},
		{"exponential", map[string]string{"RETRY_INITIAL": "1s"}, map[string]string{
			"RETRY_MAX": "5", "RETRY_DELAYS": ""}},
		{"all set", map[string]string{"RETRY_MAX": "7", "MANAGEMENT_URL": "https://admin:s3cret@mgmt.example.com"}, map[string]string{
			"RETRY_MAX": "7", "MANAGEMENT_URL": "https://admin:***@mgmt.example.com"}},
		{"management off", map[string]string{"MANAGEMENT_URL": "off"}, map[string]string{"MANAGEMENT_URL": "off"}},
		{"from AMQP_URL", map[string]string{"AMQP_URL": "amqps://relay:s3cret@rabbit.example.com/prod"}, map[string]string{
			"MANAGEMENT_URL": "https://relay:***@rabbit.example.com:15671"}},
		{"from the first of AMQP_URLS", map[string]string{"AMQP_URLS": "amqp://u:s3cret@rabbit-1/,amqp://u:s3cret@rabbit-2/"}, map[string]string{
			"MANAGEMENT_URL": "http://u:***@rabbit-1:15672"}},
		{"nothing to derive from", map[string]string{"AMQP_URL": "amqp//u:s3cret@host"}, map[string]string{"MANAGEMENT_URL": ""}},
		{"schedule not valid", map[string]string{"RETRY_DELAYS": "soon"}, map[string]string{"RETRY_MAX": "0", "RETRY_DELAYS": "soon"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Broker
			if err := Parse(func(k string) string { return tt.env[k] }, &b); err != nil {
				t.Fatal(err)
			}
			// Through a struct that embeds Broker, as every service's
			// Config does.
			svc := struct {
				Broker
				Prefetch int `env:"PREFETCH"`
			}{Broker: b}
			kv := Masked(svc)
			got := map[string]string{}
			for i := 0; i+1 < len(kv); i += 2 {
				if _, ok := tt.want[kv[i].(string)]; ok {
					got[kv[i].(string)] = kv[i+1].(string)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Masked (-want +got):\n%s", diff)
			}
			if strings.Contains(fmt.Sprint(kv), "s3cret") {
				t.Errorf("Masked shows a password: %v", kv)
			}
		})
	}
}

// outer derives a value of its own beside the embedded Broker's.
type outer struct {
	Broker
	Concurrency int `env:"CONCURRENCY"`
	Prefetch    int `env:"PREFETCH"`
}

func (o outer) Derived() map[string]string {
	return map[string]string{"PREFETCH": fmt.Sprint(2 * o.Concurrency), "RETRY_MAX": "99"}
}

// TestMaskedDerivedShadowed checks that a Config's own Derived, which
// shadows the embedded Broker's, applies to its fields, and the Broker's
// still applies to the Broker's.
func TestMaskedDerivedShadowed(t *testing.T) {
	kv := Masked(outer{Concurrency: 8})
	got := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		got[kv[i].(string)] = kv[i+1]
	}
	want := map[string]any{"PREFETCH": "16", "RETRY_MAX": "99", "RETRY_DELAYS": "500ms,5s,1m,5m", "CONCURRENCY": "8"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("Masked %s = %v, want %v", k, got[k], w)
		}
	}
	if kv := Masked(outer{Concurrency: 8, Prefetch: 3}); fmt.Sprint(kv[len(kv)-1]) != "3" {
		t.Errorf("Masked PREFETCH = %v, want the 3 it was set to", kv[len(kv)-1])
	}
}
