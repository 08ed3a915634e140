package retry

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

func TestRedactURL(t *testing.T) {
	tests := []struct {
		name string
		url  string
		want string
	}{
		{"empty", "", ""},
		{"no password", "amqp://localhost:5672/", "amqp://localhost:5672/"},
		{"user only", "amqp://guest@localhost:5672/", "amqp://guest@localhost:5672/"},
		{"password", "amqp://guest:s3cret@localhost:5672/", "amqp://guest:***@localhost:5672/"},
		{"password and vhost", "amqps://relay:hunter2@broker.example.com:5671/prod?heartbeat=10", "amqps://relay:***@broker.example.com:5671/prod?heartbeat=10"},
		{"escaped password", "amqp://user:pa%40ss%2Fw@host/", "amqp://user:***@host/"},
		{"empty password", "amqp://user:@host/", "amqp://user:***@host/"},
		{"user named xxxxx", "amqp://xxxxx:secret@host/", "amqp://xxxxx:***@host/"},
		{"bad escape", "amqp://guest:s3cr%t@localhost:5672/", "amqp://***"},
		{"space", "amqp://user:pa ss@host", "amqp://***"},
		{"bad port", "amqp://user:secret@host:port/", "amqp://***"},
		{"no colon after scheme", "amqp//user:secret@host", "***"},
		{"no scheme", "notaurl-secret", "***"},
		{"bare password", "hunter2", "***"},
		{"scheme with a space", "my secret://host", "***"},
		{"empty scheme", "://user:secret@host", "***"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RedactURL(tt.url); got != tt.want {
				t.Errorf("RedactURL(%q) = %q, want %q", tt.url, got, tt.want)
			}
		})
	}
}

func TestRedactError(t *testing.T) {
	tests := []struct {
		name    string
		url     string
		err     error
		secrets []string // none may appear in the redacted text
		want    string   // a part of the redacted text
	}{
		{"quotes the url", "amqp://guest:s3cret@localhost:5672/",
			errors.New(`dial "amqp://guest:s3cret@localhost:5672/": refused`), []string{"s3cret"}, "amqp://guest:***@localhost:5672/"},
		{"quotes the password", "amqp://guest:s3cret@localhost:5672/",
			errors.New("password s3cret refused"), []string{"s3cret"}, "password *** refused"},
		{"quotes the escaped password", "amqp://guest:p%40ss@localhost:5672/",
			errors.New("bad p%40ss, that is p@ss"), []string{"p%40ss", "p@ss"}, "bad ***, that is ***"},
		{"net/url error", "amqp://guest:s3cr%t@localhost:5672/",
			fmt.Errorf("wrapped: %w", urlError), []string{"s3cr", "%t@", "localhost"}, "does not parse"},
		{"unparseable, quoted", "amqp://user:pa ss@host",
			errors.New(`uri "amqp://user:pa ss@host" has whitespace`), []string{"pa ss", "user:", "@host"}, "amqp://***"},
		{"no scheme, quoted", "amqp//user:secret@host",
			errors.New(`scheme of "amqp//user:secret@host", that is of user:secret@host`), []string{"secret", "amqp//user"}, "***"},
		{"nothing to hide", "amqp://guest:s3cret@localhost:5672/",
			errors.New("dial tcp 127.0.0.1:5672: connect: connection refused"), nil, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RedactError(tt.err, tt.url)
			for _, s := range tt.secrets {
				if strings.Contains(got.Error(), s) {
					t.Errorf("RedactError = %q, which contains %q", got, s)
				}
			}
			if !strings.Contains(got.Error(), tt.want) {
				t.Errorf("RedactError = %q, want it to contain %q", got, tt.want)
			}
			if errors.Unwrap(got) != nil {
				t.Errorf("errors.Unwrap(RedactError) = %v, want nil", errors.Unwrap(got))
			}
		})
	}
	if RedactError(nil, "amqp://guest:s3cret@localhost/") != nil {
		t.Error("RedactError(nil) != nil")
	}
}

// urlError is what url.Parse returns for a bad escape in the password: it
// quotes the URL, and its reason quotes a piece of the password.
var urlError = func() error {
	_, err := amqp.ParseURI("amqp://guest:s3cr%t@localhost:5672/")
	return errors.Unwrap(err)
}()

// TestRedactErrorKeepsClassification checks that Supervise's isFatal still
// sees the errors a redacted error holds.
func TestRedactErrorKeepsClassification(t *testing.T) {
	const u = "amqp://relay:s3cret@localhost:5672/"
	tests := []struct {
		name string
		err  error
	}{
		{"credentials", fmt.Errorf("login as relay with s3cret: %w", amqp.ErrCredentials)},
		{"access refused", fmt.Errorf("s3cret: %w", &amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fmt.Errorf("connect: %w", RedactError(tt.err, u))
			if strings.Contains(got.Error(), "s3cret") {
				t.Errorf("error = %q, which contains the password", got)
			}
			if !isFatal(got) {
				t.Errorf("isFatal(%v) = false, want true", got)
			}
		})
	}
}
