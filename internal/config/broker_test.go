package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
)

func TestBrokerURLs(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"default", nil, []string{"amqp://guest:guest@localhost:5672/"}},
		{"AMQP_URL", map[string]string{"AMQP_URL": "amqp://u:p@rabbit:5672/"}, []string{"amqp://u:p@rabbit:5672/"}},
		{"AMQP_URLS", map[string]string{"AMQP_URLS": "amqp://u:p@rabbit-1:5672/,amqp://u:p@rabbit-2:5672/"},
			[]string{"amqp://u:p@rabbit-1:5672/", "amqp://u:p@rabbit-2:5672/"}},
		{"spaces around entries", map[string]string{"AMQP_URLS": " amqp://rabbit-1:5672/ , amqps://rabbit-2:5671/vh "},
			[]string{"amqp://rabbit-1:5672/", "amqps://rabbit-2:5671/vh"}},
		{"AMQP_URLS over AMQP_URL", map[string]string{"AMQP_URL": "amqp://single:5672/", "AMQP_URLS": "amqp://rabbit-1:5672/,amqp://rabbit-2:5672/"},
			[]string{"amqp://rabbit-1:5672/", "amqp://rabbit-2:5672/"}},
		{"one entry", map[string]string{"AMQP_URLS": "amqp://rabbit-1:5672/"}, []string{"amqp://rabbit-1:5672/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Broker
			if err := Parse(func(k string) string { return tt.env[k] }, &b); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Topology(nil); err != nil {
				t.Fatalf("Topology: %v", err)
			}
			if diff := cmp.Diff(tt.want, b.URLs()); diff != "" {
				t.Errorf("URLs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBrokerURLsInvalid checks that a bad AMQP_URLS entry stops the start
// with an error that names the variable and the entry, and shows no
// password, the bad entry's included.
func TestBrokerURLsInvalid(t *testing.T) {
	tests := []struct {
		name string
		urls string
		want string
	}{
		{"empty entry", "amqp://u:s3cret@rabbit-1/,,amqp://u:s3cret@rabbit-3/", "entry 2 of 3 is empty"},
		{"trailing comma", "amqp://u:s3cret@rabbit-1/,", "entry 2 of 2 is empty"},
		{"scheme", "amqp://u:s3cret@rabbit-1/,http://u:s3cret@rabbit-2/", `entry 2 of 2 has the scheme "http"`},
		{"no scheme", "rabbit-1:5672", "entry 1 of 1 has the scheme"},
		{"no host", "amqp:///vhost", "entry 1 of 1 names no host"},
		{"does not parse", "amqp://u:s3cret@rabbit-1/,amqp://u:s3cr%t@rabbit-2/", "entry 2 of 2 does not parse"},
		{"space in password", "amqp://u:s3cr et@rabbit-1/", "entry 1 of 1 does not parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Broker
			env := map[string]string{"AMQP_URLS": tt.urls}
			if err := Parse(func(k string) string { return env[k] }, &b); err != nil {
				t.Fatal(err)
			}
			_, err := b.Topology(nil)
			if err == nil {
				t.Fatalf("Topology with AMQP_URLS=%q = nil error, want one", tt.urls)
			}
			msg := err.Error()
			for _, w := range []string{"AMQP_URLS=", tt.want} {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			for _, secret := range []string{"s3cret", "s3cr%t", "s3cr et"} {
				if strings.Contains(msg, secret) {
					t.Errorf("error shows the password %q: %s", secret, msg)
				}
			}
		})
	}
}

// TestMaskedURLList checks the start-up log's AMQP_URLS: every node is
// named, and no password shows.
func TestMaskedURLList(t *testing.T) {
	tests := []struct {
		name string
		urls string
		want string
	}{
		{"passwords", "amqp://guest:p1@rabbit-1:5672/,amqp://relay:p2@rabbit-2:5672/vh",
			"amqp://guest:***@rabbit-1:5672/,amqp://relay:***@rabbit-2:5672/vh"},
		{"escaped comma", "amqp://u:p%2C1@rabbit-1/,amqp://u:p2@rabbit-2/", "amqp://u:***@rabbit-1/,amqp://u:***@rabbit-2/"},
		{"an entry that does not parse", "amqp://u:p1@rabbit-1/,amqp://u:p 2@rabbit-2/", "amqp://u:***@rabbit-1/,amqp://***"},
		{"no password", "amqp://rabbit-1/,amqp://rabbit-2/", "amqp://rabbit-1/,amqp://rabbit-2/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Broker
			env := map[string]string{"AMQP_URLS": tt.urls}
			if err := Parse(func(k string) string { return env[k] }, &b); err != nil {
				t.Fatal(err)
			}
			kv := Masked(b)
			got := ""
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == "AMQP_URLS" {
					got = kv[i+1].(string)
				}
			}
			if got != tt.want {
				t.Errorf("Masked AMQP_URLS = %q, want %q", got, tt.want)
			}
			for _, secret := range []string{"p1", "p2", "p 2", "p%2C1"} {
				if strings.Contains(got, secret) {
					t.Errorf("Masked AMQP_URLS shows %q: %s", secret, got)
				}
			}
		})
	}
}

// TestManagementFromURLs checks that the management API is derived from
// the first node of AMQP_URLS.
func TestManagementFromURLs(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"AMQP_URL", map[string]string{"AMQP_URL": "amqp://u:p@single:5672/"}, "http://u:p@single:15672"},
		{"AMQP_URLS", map[string]string{"AMQP_URL": "amqp://u:p@single:5672/", "AMQP_URLS": "amqp://u:p@rabbit-1:5672/,amqp://u:p@rabbit-2:5672/"},
			"http://u:p@rabbit-1:15672"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Broker
			if err := Parse(func(k string) string { return tt.env[k] }, &b); err != nil {
				t.Fatal(err)
			}
			m, err := b.Management()
			if err != nil {
				t.Fatal(err)
			}
			if m.URL != tt.want {
				t.Errorf("Management().URL = %q, want %q", m.URL, tt.want)
			}
		})
	}
}

// TestTopologyCopies: relay's topology tells the copies of one
// notification apart by the recipient header the API writes, so the
// pipeline reports and parks each recipient's copy on its own.
func TestTopologyCopies(t *testing.T) {
	var b Broker
	if err := Parse(func(string) string { return "" }, &b); err != nil {
		t.Fatal(err)
	}
	topo, err := b.Topology(nil)
	if err != nil {
		t.Fatal(err)
	}
	if topo.CopyHeader != notification.HeaderRecipient {
		t.Errorf("CopyHeader = %q, want %q", topo.CopyHeader, notification.HeaderRecipient)
	}
}
