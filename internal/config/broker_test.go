package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
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

// TestBrokerURLInvalid checks that a malformed AMQP_URL stops the start
// with an error that names AMQP_URL, whichever of the broker's settings
// reads it first, and shows no password.
func TestBrokerURLInvalid(t *testing.T) {
	tests := []struct {
		name string
		url  string
		want string
	}{
		{"the colon missing", "amqp//guest:s3cret@localhost:5672/", `lacks the "://" after amqp`},
		{"a slash missing", "amqps:/guest:s3cret@localhost:5671/", `lacks the "://" after amqps`},
		{"scheme", "http://guest:s3cret@localhost:5672/", `has the scheme "http"`},
		{"no host", "amqp:///vhost", "names no host"},
		{"does not parse", "amqp://guest:s3cr%t@localhost/", "does not parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Broker
			env := map[string]string{"AMQP_URL": tt.url}
			if err := Parse(func(k string) string { return env[k] }, &b); err != nil {
				t.Fatal(err)
			}
			_, terr := b.Topology(nil)
			_, merr := b.Management()
			for name, err := range map[string]error{"Topology": terr, "Management": merr} {
				if err == nil {
					t.Fatalf("%s with AMQP_URL=%q = nil error, want one", name, tt.url)
				}
				msg := err.Error()
				for _, w := range []string{"AMQP_URL=", tt.want} {
					if !strings.Contains(msg, w) {
						t.Errorf("%s: error %q does not contain %q", name, msg, w)
					}
				}
				if strings.Contains(msg, "MANAGEMENT_URL") {
					t.Errorf("%s: error %q blames MANAGEMENT_URL for AMQP_URL", name, msg)
				}
				if strings.Contains(msg, "s3cr") {
					t.Errorf("%s: error shows the password: %s", name, msg)
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

// TestManagementOffTheDefaultPort checks that no management API is
// derived for a broker moved off port 5672, whose API is not on 15672
// (which may be another broker's), and that relay says how to name it.
func TestManagementOffTheDefaultPort(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		want        string // the management API's URL; empty: none
		wantMissing []string
		wantDerived string
	}{
		{"the default port", map[string]string{"AMQP_URL": "amqp://u:p@localhost:5672/"}, "http://u:p@localhost:15672", nil, "http://u:***@localhost:15672"},
		{"another port", map[string]string{"AMQP_URL": "amqp://u:p@localhost:5673/"}, "",
			[]string{"MANAGEMENT_URL is empty", "AMQP_URL, which names port 5673", "port 15672 of localhost may be another broker's", "http://u:<password>@localhost:<its management port>", "or to off"},
			"off"},
		{"another port, the first of AMQP_URLS", map[string]string{"AMQP_URLS": "amqps://rabbit-1:5999/,amqps://rabbit-2:5671/"}, "",
			[]string{"AMQP_URLS, which names port 5999", "https://guest:guest@rabbit-1:<its management port>"}, "off"},
		{"another port, MANAGEMENT_URL set", map[string]string{"AMQP_URL": "amqp://u:p@localhost:5673/", "MANAGEMENT_URL": "http://u:p@localhost:15673"}, "http://u:p@localhost:15673", nil, ""},
		{"another port, off", map[string]string{"AMQP_URL": "amqp://u:p@localhost:5673/", "MANAGEMENT_URL": "off"}, "", nil, ""},
	}
	// MANAGEMENT_URL serves the AMQP URL's virtual host, whatever its port.
	for _, u := range []string{"amqp://u:p@localhost:5672/orders%2Feu", "amqp://u:p@localhost:5673/orders%2Feu"} {
		b := Broker{AMQPURL: u, ManagementURL: "http://u:p@localhost:15673"}
		if m, err := b.Management(); err != nil || m == nil || m.Vhost != "orders/eu" {
			t.Errorf("%s with MANAGEMENT_URL: Management() = %+v, %v; want the vhost orders/eu", u, m, err)
		}
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
			if got := ""; m != nil && m.URL != tt.want || m == nil && tt.want != got {
				t.Errorf("Management() = %+v, want %q", m, tt.want)
			}
			missing := b.ManagementMissing()
			if (missing != nil) != (tt.wantMissing != nil) {
				t.Fatalf("ManagementMissing() = %v, want it to say %q", missing, tt.wantMissing)
			}
			for _, w := range tt.wantMissing {
				if !strings.Contains(missing.Error(), w) {
					t.Errorf("ManagementMissing() = %q, want it to say %q", missing, w)
				}
			}
			var derived string
			kv := Masked(b)
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == "MANAGEMENT_URL" {
					derived = kv[i+1].(string)
				}
			}
			if tt.wantDerived != "" && derived != tt.wantDerived {
				t.Errorf("the start-up log's MANAGEMENT_URL = %q, want %q", derived, tt.wantDerived)
			}
		})
	}
}

// TestTopologyCopies: relay's topology tells the copies of one
// notification apart by the recipient header the API writes, so the
// pipeline reports and parks each recipient's copy on its own, and reads
// each copy's tenant from the tenant header the API writes, so its events
// name it.
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
	if topo.TenantHeader != notification.HeaderTenant {
		t.Errorf("TenantHeader = %q, want %q", topo.TenantHeader, notification.HeaderTenant)
	}
}

// TestWorkLanes: WORK_LANES spreads every route over that many lanes, 1
// (the default, and 0) leaves them one queue each, and a count out of
// range is an error naming the variable.
func TestWorkLanes(t *testing.T) {
	routes := []retry.Route{{Queue: "email-queue", Key: "email"}, {Queue: "webhook-queue", Key: "webhook"}}
	for _, tt := range []struct {
		value   string
		lanes   int
		wantErr bool
	}{{"", 1, false}, {"1", 1, false}, {"8", 8, false}, {"64", 64, false}, {"0", 1, false}, {"65", 0, true}, {"-2", 0, true}} {
		var b Broker
		err := Parse(func(k string) string {
			if k == "WORK_LANES" {
				return tt.value
			}
			return ""
		}, &b)
		var topo retry.Topology
		if err == nil {
			topo, err = b.Topology(routes)
		}
		switch {
		case tt.wantErr && (err == nil || !strings.Contains(err.Error(), "WORK_LANES")):
			t.Errorf("WORK_LANES=%q: %v, want an error naming WORK_LANES", tt.value, err)
		case !tt.wantErr && err != nil:
			t.Errorf("WORK_LANES=%q: %v", tt.value, err)
		case !tt.wantErr:
			for _, r := range topo.Routes {
				if max(r.Lanes, 1) != tt.lanes {
					t.Errorf("WORK_LANES=%q: route %s has %d lanes, want %d", tt.value, r.Queue, r.Lanes, tt.lanes)
				}
			}
			if routes[0].Lanes != 0 {
				t.Fatal("Topology changed the caller's routes")
			}
		}
	}
}
