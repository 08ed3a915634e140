package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/relay-demo/relay/retry"
)

// brokerAPI reads the broker's memory from its management HTTP API: at
// MANAGEMENT_URL if set, else at the address and with the credentials
// retry.ManagementFor derives from the AMQP URL.
type brokerAPI struct {
	base   *url.URL // without credentials
	user   *url.Userinfo
	vhost  string
	client *http.Client
}

// newBrokerAPI is the management API at mgmtURL, or, when that is empty,
// at the address derived from the AMQP URL.
func newBrokerAPI(amqpURL, mgmtURL string) (*brokerAPI, error) {
	var m *retry.Management
	if mgmtURL != "" {
		vhost, err := retry.VhostOf(amqpURL)
		if err != nil {
			return nil, err
		}
		m = &retry.Management{URL: mgmtURL, Vhost: vhost}
	} else {
		var err error
		if m, err = retry.ManagementFor(amqpURL); err != nil {
			return nil, err
		}
	}
	base, err := url.Parse(m.URL)
	if err != nil || base.Host == "" {
		return nil, errors.New("the management API URL does not parse")
	}
	user := base.User
	base.User = nil
	return &brokerAPI{base: base, user: user, vhost: m.Vhost, client: &http.Client{Timeout: 10 * time.Second}}, nil
}

// String names the API's address, without credentials, for messages.
func (a *brokerAPI) String() string { return a.base.String() }

// get decodes the JSON answer to GET path into out.
func (a *brokerAPI) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(a.base.String(), "/")+path, nil)
	if err != nil {
		return err
	}
	if a.user != nil {
		pass, _ := a.user.Password()
		req.SetBasicAuth(a.user.Username(), pass)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("GET %s: decode: %w", path, err)
	}
	return nil
}

// nodeMemory is what the bench reads of the broker's node.
type nodeMemory struct {
	Name string
	// Used is the node's memory in use as its memory alarm counts it,
	// computed when asked (see node); Limit is the high watermark that
	// raises the alarm.
	Used, Limit uint64
	// Allocated is what the Erlang VM's allocators hold for its data;
	// Used (the VM's RSS by default) also counts memory they took from
	// the system and have not handed back.
	Allocated uint64
	// DiskFree and DiskFreeLimit are the free disk space of the node's
	// data directory and the limit that raises the disk alarm.
	DiskFree, DiskFreeLimit uint64
	// Alarm is set when either alarm is raised.
	Alarm bool
}

// node reads the memory of the node the API runs on. mem_used is a
// sample the node takes every few seconds and its statistics publish
// every five: read at once after a pile-up, it would be the figure from
// before. With ?memory=true the node computes its memory breakdown when
// asked, and its total under the node's own strategy (rss or allocated)
// is mem_used, up to date; mem_used is the fallback.
func (a *brokerAPI) node(ctx context.Context) (nodeMemory, error) {
	var overview struct {
		Node string `json:"node"`
	}
	if err := a.get(ctx, "/api/overview", &overview); err != nil {
		return nodeMemory{}, err
	}
	if overview.Node == "" {
		return nodeMemory{}, errors.New("GET /api/overview: no node name")
	}
	var n struct {
		MemUsed       uint64 `json:"mem_used"`
		MemLimit      uint64 `json:"mem_limit"`
		MemAlarm      bool   `json:"mem_alarm"`
		DiskFree      uint64 `json:"disk_free"`
		DiskFreeLimit uint64 `json:"disk_free_limit"`
		DiskFreeAlarm bool   `json:"disk_free_alarm"`
		Strategy      string `json:"mem_calculation_strategy"`
		Memory        struct {
			Total map[string]uint64 `json:"total"`
		} `json:"memory"`
	}
	if err := a.get(ctx, "/api/nodes/"+url.PathEscape(overview.Node)+"?memory=true", &n); err != nil {
		return nodeMemory{}, err
	}
	used := n.MemUsed
	if live, ok := n.Memory.Total[n.Strategy]; ok && live > 0 {
		used = live
	}
	if used == 0 || n.MemLimit == 0 {
		return nodeMemory{}, fmt.Errorf("node %s reports no mem_used or mem_limit", overview.Node)
	}
	return nodeMemory{Name: overview.Node, Used: used, Limit: n.MemLimit, Allocated: n.Memory.Total["allocated"],
		DiskFree: n.DiskFree, DiskFreeLimit: n.DiskFreeLimit, Alarm: n.MemAlarm || n.DiskFreeAlarm}, nil
}

// queueMemory is what the bench reads of one queue.
type queueMemory struct {
	Messages int
	// Memory is the bytes the queue's own Erlang process holds (the
	// management API's "memory"): for a classic queue, the messages it
	// keeps in memory; for a quorum queue, its Raft server's state.
	Memory uint64
}

// queue reads a queue's message count and memory. Both come from the
// statistics the queue publishes every five seconds or so.
func (a *brokerAPI) queue(ctx context.Context, name string) (queueMemory, error) {
	var q struct {
		Messages *int   `json:"messages"`
		Memory   uint64 `json:"memory"`
	}
	vhost := a.vhost
	if vhost == "" {
		vhost = "/"
	}
	if err := a.get(ctx, "/api/queues/"+url.PathEscape(vhost)+"/"+url.PathEscape(name), &q); err != nil {
		return queueMemory{}, err
	}
	if q.Messages == nil {
		// A queue declared a moment ago has published no statistics yet.
		return queueMemory{Messages: -1, Memory: q.Memory}, nil
	}
	return queueMemory{Messages: *q.Messages, Memory: q.Memory}, nil
}

// queueHolding polls the queue's statistics, every 250ms within
// patience, until they count n messages and its memory, and returns
// them: its memory is then that of the queue holding them. The count and
// the memory come in separate statistics events: a reading can hold the
// count before the memory is reported at all.
func (a *brokerAPI) queueHolding(ctx context.Context, name string, n int, patience time.Duration) (queueMemory, error) {
	ctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		q, err := a.queue(ctx, name)
		if err == nil && q.Messages >= n && q.Memory > 0 {
			return q, nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return queueMemory{}, err
			}
			if q.Messages >= n {
				return queueMemory{}, fmt.Errorf("the management API counted %d messages in %q but reported no memory for it after %s", q.Messages, name, patience)
			}
			return queueMemory{}, fmt.Errorf("the management API counted %d of %d messages in %q after %s", q.Messages, n, name, patience)
		case <-tick.C:
		}
	}
}

// settled reads the node's memory until it holds still, a reading every
// half second within patience, and returns the last reading: a queue of
// messages deleted a moment ago (the previous backend's) is still being
// handed back, and a pile-up measured from there would be measured
// against memory on its way out.
func (a *brokerAPI) settled(ctx context.Context, patience time.Duration) (nodeMemory, error) {
	last, err := a.node(ctx)
	if err != nil {
		return nodeMemory{}, err
	}
	deadline := time.After(patience)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nodeMemory{}, ctx.Err()
		case <-deadline:
			return last, nil
		case <-tick.C:
		}
		now, err := a.node(ctx)
		if err != nil {
			return nodeMemory{}, err
		}
		if still(last.Used, now.Used) && still(last.Allocated, now.Allocated) {
			return now, nil
		}
		last = now
	}
}

// still reports whether two readings of memory differ by less than 1 %
// or 4 MiB, whichever is more.
func still(a, b uint64) bool {
	d := max(a, b) - min(a, b)
	return d < 4<<20 || d*100 < max(a, b)
}
