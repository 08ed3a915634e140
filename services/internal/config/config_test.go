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
