//go:build compose

package compose

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/internal/apiclient"
	"github.com/relay-demo/relay/internal/notification"
)

// token is the demo's API token (docker-compose.yml, x-demo-token).
const token = "demo-token-change-me-0001"

// schedule is the demo's RETRY_DELAYS.
var schedule = []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second}

// demo is one run of the compose project, under a name of its own, with
// every host port on a free one.
type demo struct {
	t           testing.TB // the running step's, which records its failures
	top         *testing.T
	failures    []string // every step's failures, repeated after the logs
	root        string
	env         []string
	api         string // the single-node stack's API
	clusterAPI  string
	composeArgs []string
	// The demo's settings as docker compose gives them to the API
	// (checkDelayBackend): DELAY_BACKEND, QUEUE_TYPE; and the delay backend
	// relay runs.
	delayBackend, queueType, backend string
}

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func newDemo(t *testing.T) *demo {
	d := &demo{t: t, top: t, root: repoRoot(t)}
	ports := map[string]string{}
	for _, v := range []string{"RELAY_API_PORT", "RELAY_AMQP_PORT", "RELAY_MANAGEMENT_PORT", "RELAY_FLAKY_PORT",
		"RELAY_CLUSTER_API_PORT", "RELAY_CLUSTER_MANAGEMENT_PORT", "RELAY_PROMETHEUS_PORT", "RELAY_JAEGER_PORT"} {
		ports[v] = freePort(t)
		if set := os.Getenv(v); set != "" {
			ports[v] = set
		}
		d.env = append(d.env, v+"="+ports[v])
	}
	d.api = "http://127.0.0.1:" + ports["RELAY_API_PORT"]
	d.clusterAPI = "http://127.0.0.1:" + ports["RELAY_CLUSTER_API_PORT"]
	project := os.Getenv("COMPOSE_PROJECT_NAME")
	if project == "" {
		project = fmt.Sprintf("relaytest%d", time.Now().UnixNano()%1_000_000)
	}
	d.env = append(d.env, "COMPOSE_PROJECT_NAME="+project)
	d.composeArgs = []string{"compose", "--project-directory", d.root, "--profile", "cluster"}
	for _, f := range strings.Split(os.Getenv("RELAY_COMPOSE_FILES"), ":") {
		if f != "" {
			d.composeArgs = append(d.composeArgs, "-f", f)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := d.compose(2*time.Minute, "logs", "--no-color", "--tail", "40")
			t.Logf("logs of the failed run:\n%s", out)
			t.Logf("what failed:\n%s", strings.Join(d.failures, "\n"))
		}
		if out, err := d.compose(5*time.Minute, "down", "--volumes", "--remove-orphans", "--timeout", "10"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
	})
	return d
}

// command is docker compose with the demo's environment.
func (d *demo) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "docker", append(append([]string{}, d.composeArgs...), args...)...)
	cmd.Dir = d.root
	cmd.Env = append(os.Environ(), d.env...)
	return cmd
}

// compose runs docker compose with the demo's environment.
func (d *demo) compose(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := d.command(ctx, args...).CombinedOutput()
	return string(out), err
}

func (d *demo) must(timeout time.Duration, args ...string) string {
	d.t.Helper()
	start := time.Now()
	out, err := d.compose(timeout, args...)
	if err != nil {
		d.t.Fatalf("docker compose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	d.t.Logf("docker compose %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Second))
	return out
}

// container is a line of docker compose ps --format json.
type container struct {
	Name, Service, State, Health string
}

func (d *demo) ps() []container {
	d.t.Helper()
	out, err := d.compose(time.Minute, "ps", "--all", "--format", "json")
	if err != nil {
		d.t.Fatalf("docker compose ps: %v\n%s", err, out)
	}
	var cs []container
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var c container
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			d.t.Fatalf("docker compose ps line %q: %v", line, err)
		}
		cs = append(cs, c)
	}
	return cs
}

// waitHealthy waits until each of services has want healthy containers.
func (d *demo) waitHealthy(timeout time.Duration, want int, services ...string) {
	d.t.Helper()
	start := time.Now()
	var last []container
	for time.Since(start) < timeout {
		last = d.ps()
		healthy := map[string]int{}
		for _, c := range last {
			if c.State == "running" && c.Health == "healthy" {
				healthy[c.Service]++
			}
		}
		ok := true
		for _, s := range services {
			ok = ok && healthy[s] >= want
		}
		if ok {
			d.t.Logf("healthy after %s: %s", time.Since(start).Round(time.Second), strings.Join(services, " "))
			return
		}
		time.Sleep(2 * time.Second) // polling docker, with a deadline
	}
	d.t.Fatalf("after %s, not every one of %q is healthy: %+v", timeout, services, last)
}

// call does one API request and decodes the answer into out.
func call(t testing.TB, method, url string, body any, want int, out any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %s, want %d: %s", method, url, resp.Status, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, url, raw, err)
		}
	}
}

// postBatch posts n notifications, each to email and webhook, in one
// batch, and returns their ids.
func postBatch(t testing.TB, api string, n int) []string {
	t.Helper()
	var items []map[string]any
	for i := range n {
		items = append(items, map[string]any{
			"email":   map[string]any{"to": []string{fmt.Sprintf("user%d@example.com", i)}, "subject": "compose test", "text": "hello"},
			"webhook": map[string]any{"url": "http://flaky:9090/webhooks/demo", "payload": map[string]any{"n": i}},
		})
	}
	var answer struct {
		Results []struct {
			ID string `json:"id"`
		} `json:"results"`
	}
	call(t, http.MethodPost, api+"/v1/notifications/batch", map[string]any{"notifications": items}, http.StatusAccepted, &answer)
	var ids []string
	for _, r := range answer.Results {
		if r.ID == "" {
			t.Fatalf("a batch item has no id: %+v", answer)
		}
		ids = append(ids, r.ID)
	}
	if len(ids) != n {
		t.Fatalf("%d ids for a batch of %d", len(ids), n)
	}
	return ids
}

// tally counts the copies of ids by status, reading each from the
// history; missing counts the ids the history does not know.
type tally struct {
	byStatus map[string]int
	missing  int
	copies   []notification.Copy
}

func (tl tally) finished() bool {
	n := 0
	for s, c := range tl.byStatus {
		if s != "delivered" && s != "parked" {
			return false
		}
		n += c
	}
	return tl.missing == 0 && n > 0
}

func count(t testing.TB, api string, ids []string) tally {
	t.Helper()
	tl := tally{byStatus: map[string]int{}}
	c := apiclient.New(api, token, nil)
	for _, id := range ids {
		n, err := c.Notification(context.Background(), id)
		if err != nil {
			tl.missing++
			continue
		}
		for _, cp := range n.Copies {
			tl.byStatus[string(cp.Status)]++
			tl.copies = append(tl.copies, cp)
		}
	}
	return tl
}

// waitFinished waits until every copy of ids is delivered or parked; what
// is still missing or on its way at the deadline is lost.
func waitFinished(t testing.TB, api string, ids []string, timeout time.Duration) tally {
	t.Helper()
	start := time.Now()
	var tl tally
	for {
		tl = count(t, api, ids)
		if tl.finished() {
			t.Logf("%d notifications finished after %s: %v", len(ids), time.Since(start).Round(time.Second), tl.byStatus)
			return tl
		}
		if time.Since(start) > timeout {
			t.Fatalf("after %s, of %d notifications: %d not in the history, copies %v: lost", timeout, len(ids), tl.missing, tl.byStatus)
		}
		time.Sleep(time.Second) // polling the API, with a deadline
	}
}

// checkSchedule checks that every retry waited at least the delay the
// retry stage chose, and that the delays chosen are the schedule's. An
// attempt the history marks deferred (a mail server over its shared
// limit, every circuit open, a downstream's Retry-After) waits without
// spending a retry: it is held to its own wait, not to the schedule, and
// the retries after it keep their place in the schedule.
func checkSchedule(t testing.TB, tl tally) (retried int) {
	t.Helper()
	for _, cp := range tl.copies {
		retries := 0
		for i := 1; i < len(cp.Attempts); i++ {
			prev, next := cp.Attempts[i-1], cp.Attempts[i]
			if prev.DelayMS == nil {
				continue
			}
			want := time.Duration(*prev.DelayMS) * time.Millisecond
			if gap := next.At.Sub(prev.At); gap < want-want/20 {
				t.Errorf("%s copy: attempt %d came %s after attempt %d, before its delay of %s", cp.Channel, next.N, gap, prev.N, want)
			}
			if prev.Deferred {
				continue
			}
			retried++
			if retries < len(schedule) && want < schedule[retries] {
				t.Errorf("%s copy: retry %d (after attempt %d) waited %s, shorter than the schedule's %s", cp.Channel, retries+1, prev.N, want, schedule[retries])
			}
			retries++
		}
	}
	return retried
}

func deadLetters(t testing.TB, api string) int {
	t.Helper()
	var answer struct {
		DeadLetters []json.RawMessage `json:"dead_letters"`
	}
	call(t, http.MethodGet, api+"/v1/dead-letters?limit=1000", nil, http.StatusOK, &answer)
	return len(answer.DeadLetters)
}

// step runs one step of the demo as a subtest, which the demo's helpers
// report to, and ends the test if it failed: the next steps build on it.
func (d *demo) step(name string, f func(t testing.TB)) {
	parent := d.top
	ok := parent.Run(name, func(t *testing.T) {
		d.t = &recorder{TB: t, d: d, step: name}
		f(d.t)
	})
	d.t = parent
	if !ok {
		parent.FailNow()
	}
}

// recorder is a step's testing.TB that keeps each failure's message, so
// the end of a failed run repeats them after the services' logs, where
// a reader of the last lines of the output finds them.
type recorder struct {
	testing.TB
	d    *demo
	step string
}

func (r *recorder) note(msg string) {
	r.d.failures = append(r.d.failures, r.step+": "+msg)
}

func (r *recorder) Errorf(format string, args ...any) {
	r.TB.Helper()
	r.note(fmt.Sprintf(format, args...))
	r.TB.Errorf(format, args...)
}

func (r *recorder) Error(args ...any) {
	r.TB.Helper()
	r.note(fmt.Sprint(args...))
	r.TB.Error(args...)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.TB.Helper()
	r.note(fmt.Sprintf(format, args...))
	r.TB.Fatalf(format, args...)
}

func (r *recorder) Fatal(args ...any) {
	r.TB.Helper()
	r.note(fmt.Sprint(args...))
	r.TB.Fatal(args...)
}

// demoServices are the single-node stack's services with a health check.
var demoServices = []string{"rabbitmq", "api", "email-worker", "webhook-worker", "sms-worker", "retrier", "flaky"}

func TestComposeDemo(t *testing.T) {
	d := newDemo(t)
	var first []string
	d.step("up", func(t testing.TB) {
		d.must(20*time.Minute, "up", "--detach", "--build", "api", "email-worker", "webhook-worker", "sms-worker", "retrier", "flaky", "sender")
		d.waitHealthy(5*time.Minute, 1, demoServices...)
		d.checkDelayBackend(t)
	})
	d.step("a batch of 100 retried on the schedule, delivered or parked", func(t testing.TB) {
		first = postBatch(t, d.api, 100)
		tl := waitFinished(t, d.api, first, 4*time.Minute)
		// Every copy ended delivered or parked (waitFinished). With
		// FLAKY_RATE 0.5 and four retries a webhook copy is parked one time
		// in 32, and an email copy, which fails over to the backup server,
		// more rarely: a batch with none parked is unlikely, not wrong. The
		// dead-letter queue must hold some by the step that checks it
		// across down and up, after 250 notifications.
		if tl.byStatus["delivered"] == 0 {
			t.Errorf("copies %v: want some delivered (FLAKY_RATE 0.5, four retries)", tl.byStatus)
		}
		retried := checkSchedule(t, tl)
		if retried == 0 {
			t.Error("no copy was retried")
		}
		t.Logf("200 copies: %v, %d retries", tl.byStatus, retried)
	})
	// Nothing is lost through a SIGKILL of the broker only on quorum
	// queues and a backend whose waits are queues too (docs/guarantees.md):
	// on other settings, such as the demo's own (classic queues, the
	// plugin), the broker is stopped twice.
	outage, second := "stopped twice", []string{"stop", "rabbitmq"}
	if d.queueType == "quorum" && d.backend != "plugin" {
		outage, second = "stopped and killed", []string{"kill", "-s", "SIGKILL", "rabbitmq"}
	}
	d.step("broker "+outage+" mid-run: lost 0", func(t testing.TB) {
		ids := postBatch(t, d.api, 100)
		d.must(2*time.Minute, "stop", "rabbitmq")
		d.must(2*time.Minute, "start", "rabbitmq")
		d.waitHealthy(3*time.Minute, 1, "rabbitmq")
		more := postWhenReady(t, d.api, 50)
		d.must(2*time.Minute, second...)
		d.must(2*time.Minute, "start", "rabbitmq")
		d.waitHealthy(3*time.Minute, 1, demoServices...)
		tl := waitFinished(t, d.api, append(ids, more...), 5*time.Minute)
		t.Logf("broker %s, 150 notifications: %v, lost 0", outage, tl.byStatus)
	})
	d.step("down and up keep the history, the waiting retries and the dead-letter queue", func(t testing.TB) {
		parked := deadLetters(t, d.api)
		if parked == 0 {
			t.Fatal("the dead-letter queue is empty before down")
		}
		ids := postBatch(t, d.api, 20)
		// Down while some copies wait for a retry.
		deadline := time.Now().Add(time.Minute)
		for count(t, d.api, ids).byStatus["retrying"] == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no copy is waiting for a retry")
			}
			time.Sleep(200 * time.Millisecond) // polling the API, with a deadline
		}
		d.must(5*time.Minute, "down")
		d.must(10*time.Minute, "up", "--detach", "api", "email-worker", "webhook-worker", "sms-worker", "retrier", "flaky")
		d.waitHealthy(5*time.Minute, 1, demoServices...)
		if tl := count(t, d.api, first); tl.missing > 0 || !tl.finished() {
			t.Errorf("after down and up, the first batch's history: %d missing, copies %v", tl.missing, tl.byStatus)
		}
		if got := deadLetters(t, d.api); got < parked {
			t.Errorf("after down and up the dead-letter queue holds %d messages, before %d", got, parked)
		}
		waitFinished(t, d.api, ids, 3*time.Minute)
	})
	d.step("three webhook workers", func(t testing.TB) {
		d.must(5*time.Minute, "up", "--detach", "--no-recreate", "--scale", "webhook-worker=3", "webhook-worker")
		d.waitHealthy(3*time.Minute, 3, "webhook-worker")
		waitFinished(t, d.api, postBatch(t, d.api, 30), 3*time.Minute)
	})
	d.step("the cluster profile with a node stopped", func(t testing.TB) {
		d.must(10*time.Minute, "up", "--detach", "cluster-api", "cluster-email-worker", "cluster-webhook-worker", "cluster-sms-worker", "cluster-retrier")
		d.waitHealthy(5*time.Minute, 1, "rabbit-1", "rabbit-2", "rabbit-3", "cluster-api", "cluster-email-worker", "cluster-webhook-worker", "cluster-sms-worker", "cluster-retrier")
		ids := postBatch(t, d.clusterAPI, 30)
		d.must(2*time.Minute, "stop", "rabbit-2")
		tl := waitFinished(t, d.clusterAPI, ids, 4*time.Minute)
		t.Logf("on the cluster with rabbit-2 stopped: %v", tl.byStatus)
		d.must(2*time.Minute, "start", "rabbit-2")
	})
}

// checkDelayBackend reads the demo's settings and checks that relay runs
// the delay backend the demo sets (DELAY_BACKEND as docker compose gives
// it to the API: the demo's own, plugin, unless the run sets another),
// and that with the plugin its waits go to an x-delayed-message exchange
// on the broker.
func (d *demo) checkDelayBackend(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Only stdout: what compose warns about on stderr is no JSON.
	out, err := d.command(ctx, "config", "--format", "json").Output()
	if err != nil {
		t.Fatalf("docker compose config: %v", err)
	}
	var config struct {
		Services map[string]struct {
			Environment map[string]*string `json:"environment"`
		} `json:"services"`
	}
	if err := json.Unmarshal(out, &config); err != nil {
		t.Fatalf("docker compose config: %v", err)
	}
	env := config.Services["api"].Environment
	for name, v := range map[string]*string{"DELAY_BACKEND": &d.delayBackend, "QUEUE_TYPE": &d.queueType} {
		if env[name] == nil {
			t.Fatalf("docker compose config: the api service has no %s", name)
		}
		*v = *env[name]
	}
	var pipeline struct {
		Backend string `json:"backend"`
	}
	call(t, http.MethodGet, d.api+"/dashboard/pipeline", nil, http.StatusOK, &pipeline)
	if d.delayBackend != "auto" && pipeline.Backend != d.delayBackend {
		t.Fatalf("relay runs the %q delay backend, the demo sets DELAY_BACKEND=%s", pipeline.Backend, d.delayBackend)
	}
	d.backend = pipeline.Backend
	if pipeline.Backend != "plugin" {
		t.Logf("delay backend: %s (DELAY_BACKEND=%s), QUEUE_TYPE=%s", pipeline.Backend, d.delayBackend, d.queueType)
		return
	}
	exchanges := d.must(time.Minute, "exec", "-T", "rabbitmq", "rabbitmqctl", "-q", "list_exchanges", "name", "type")
	kind := ""
	for _, line := range strings.Split(exchanges, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "wait-exchange" {
			kind = f[1]
		}
	}
	if kind != "x-delayed-message" {
		t.Fatalf("relay runs the plugin delay backend, but the broker's wait-exchange is %q, not x-delayed-message:\n%s", kind, exchanges)
	}
	t.Logf("delay backend: plugin (DELAY_BACKEND=%s), wait-exchange x-delayed-message on the broker; QUEUE_TYPE=%s", d.delayBackend, d.queueType)
}

// postWhenReady posts a batch of n once the API answers /readyz.
func postWhenReady(t testing.TB, api string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(api + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return postBatch(t, api, n)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API is not ready 2 minutes after the broker is back")
		}
		time.Sleep(250 * time.Millisecond) // polling the API, with a deadline
	}
}
