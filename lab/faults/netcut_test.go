//go:build faults

package faults_test

import (
	"context"
	"fmt"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// TestConnectionCuts puts a TCP proxy between `relay all` (run in-process)
// and the broker, and while 1,000 notifications flow it slows every byte,
// cuts every connection (proxy off and on), resets them, blackholes them
// until they time out, and holds them in a latency spike; then it checks
// that every accepted copy ends delivered or parked.
func TestConnectionCuts(t *testing.T) {
	r := newRig(t, defaults())
	px := startProxy(t, r.url)
	env := map[string]string{}
	for k, v := range r.env {
		env[k] = v
	}
	env["AMQP_URL"] = px.url
	r.startInProcess(env)

	const n = 1000
	l := r.send(n, 8, 100, 3*time.Minute)
	px.toxic(`{"name":"slow-up","type":"latency","stream":"upstream","attributes":{"latency":20,"jitter":10}}`)
	px.toxic(`{"name":"slow-down","type":"latency","stream":"downstream","attributes":{"latency":20,"jitter":10}}`)

	r.waitAccepted(l, n*15/100, time.Minute)
	px.cut(1500 * time.Millisecond)

	r.waitAccepted(l, n*35/100, time.Minute)
	px.toxic(`{"name":"reset","type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`)
	hold(300 * time.Millisecond)
	px.remove("reset")

	r.waitAccepted(l, n*55/100, time.Minute)
	// Bytes vanish; the proxy closes the connections after two seconds.
	px.toxic(`{"name":"blackhole","type":"timeout","stream":"upstream","attributes":{"timeout":2000}}`)
	hold(2500 * time.Millisecond)
	px.remove("blackhole")

	r.waitAccepted(l, n*75/100, time.Minute)
	px.toxic(`{"name":"spike","type":"latency","stream":"downstream","attributes":{"latency":1500,"jitter":0}}`)
	hold(3 * time.Second)
	px.remove("spike")

	r.waitAccepted(l, n*90/100, time.Minute)
	px.cut(time.Second)

	r.finish(l, true, 2*time.Minute)
	px.remove("slow-up")
	px.remove("slow-down")
	r.settle("connection cuts", l, 2*time.Minute)
}

// proxy is a toxiproxy proxy in front of the broker, run in-process.
type proxy struct {
	t   *testing.T
	p   *toxiproxy.Proxy
	url string // the broker's URL through the proxy
}

// startProxy starts a proxy on a free loopback port to the broker at
// brokerURL.
func startProxy(t *testing.T, brokerURL string) *proxy {
	t.Helper()
	u, err := neturl.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "amqp", "127.0.0.1:0", u.Host)
	if err := srv.Collection.Add(p, true); err != nil {
		t.Fatalf("start proxy: %v", err)
	}
	t.Cleanup(func() { _ = srv.Collection.Clear() })
	u.Host = p.Listen
	t.Logf("proxy %s -> %s", p.Listen, p.Upstream)
	return &proxy{t: t, p: p, url: u.String()}
}

// toxic adds a toxic, given in toxiproxy's JSON form.
func (px *proxy) toxic(spec string) {
	px.t.Helper()
	if _, err := px.p.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
		px.t.Fatalf("add toxic %s: %v", spec, err)
	}
	px.t.Logf("toxic on: %s", spec)
}

// remove takes a toxic away.
func (px *proxy) remove(name string) {
	px.t.Helper()
	if err := px.p.Toxics.RemoveToxic(context.Background(), name); err != nil {
		px.t.Fatalf("remove toxic %s: %v", name, err)
	}
	px.t.Logf("toxic off: %s", name)
}

// cut closes every connection through the proxy and refuses new ones for
// d, then lets them in again.
func (px *proxy) cut(d time.Duration) {
	px.t.Helper()
	px.p.Stop()
	hold(d)
	if err := px.p.Start(); err != nil {
		px.t.Fatalf("restart proxy: %v", err)
	}
	px.t.Logf("%s", fmt.Sprintf("connections cut for %s", d))
}
