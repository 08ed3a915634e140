//go:build integration

package peers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/relay-demo/relay/internal/testenv"
	"github.com/relay-demo/relay/lab/internal/section"
	"github.com/relay-demo/relay/retry"
)

// TestMain lets the parent test run this test binary as its children: a
// child is the command itself.
func TestMain(m *testing.M) {
	if os.Getenv("PEERS_TEST_CHILD") == "1" {
		if err := Run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "peers:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testOptions are the command's defaults with the servers of the
// environment and short intervals.
func testOptions(t *testing.T) Options {
	t.Helper()
	o, err := parseOptions([]string{"--timeout", "90s", "--settle", "200ms", "--progress", "2s"}, os.Getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// needServer skips the test when the server does not answer within a few
// seconds, polling until then, and fails it instead under CI=true
// (testenv.Unavailable: this module lies under the root module's import
// path, so Go's internal rule lets it import the root's internal/testenv).
func needServer(t *testing.T, s Server, o Options) {
	t.Helper()
	ping := map[Server]func(context.Context) error{
		RabbitMQ: func(context.Context) error {
			conn, err := amqp.Dial(o.AMQPURL)
			if err == nil {
				conn.Close()
			}
			return retry.RedactError(err, o.AMQPURL)
		},
		Redis: func(ctx context.Context) error {
			rdb := redis.NewClient(&redis.Options{Addr: o.RedisAddr})
			defer rdb.Close()
			return rdb.Ping(ctx).Err()
		},
		PostgreSQL: func(ctx context.Context) error {
			conn, err := pgx.Connect(ctx, o.PostgresDSN)
			if err != nil {
				return err
			}
			return conn.Close(ctx)
		},
	}[s]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	for {
		attempt, stop := context.WithTimeout(ctx, time.Second)
		err = ping(attempt)
		stop()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			testenv.Unavailable(t, "%s does not answer (set AMQP_URL, REDIS_ADDR or PEERS_PG_DSN to point at one): %v", s, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestEverySystem runs each system with 200 jobs, in this process, and
// checks that it comes to exactly what the failure decision says, and that
// it left nothing behind on its server.
func TestEverySystem(t *testing.T) {
	o := testOptions(t)
	w := DefaultWorkload
	w.Jobs = 200
	// Everything parks in a second workload: the parking path of each
	// system is exercised too.
	parking := w
	parking.Jobs, parking.FailRate, parking.MaxRetries = 20, 1, 2
	for _, sys := range systems {
		for _, wl := range []struct {
			name string
			w    Workload
		}{{"retries", w}, {"parks", parking}} {
			t.Run(sys.Name+"/"+wl.name, func(t *testing.T) {
				needServer(t, sys.Server, o)
				if sys.Needs43 {
					need43(t, o.AMQPURL)
				}
				o := o
				if sys.Fsync != "" {
					srv, err := startRedis(context.Background(), sys.Fsync)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() {
						if err := srv.Stop(); err != nil {
							t.Error(err)
						}
					})
					o.RedisAddr = srv.Addr
				}
				p := sys.New(o, wl.w)
				var progress bytes.Buffer
				res := runPeer(context.Background(), sys, p, o, wl.w, &progress)
				if res.Err != "" {
					t.Fatalf("run failed: %s", res.Err)
				}
				want := wl.w.Expect()
				got := Expect{Delivered: res.Delivered, Parked: res.Parked, Attempts: res.Attempts, Retries: res.Retries}
				if got != want {
					t.Errorf("came to %+v, want %+v", got, want)
				}
				if res.Lost != 0 || res.Duplicates != 0 {
					t.Errorf("lost %d, duplicates %d; want none", res.Lost, res.Duplicates)
				}
				if res.Elapsed <= 0 || res.JobsPerSecond() <= 0 {
					t.Errorf("elapsed %v, %v jobs/s; want both positive", res.Elapsed, res.JobsPerSecond())
				}
				if want.Retries > 0 && res.LateP99 < res.LateP50 {
					t.Errorf("lateness p99 %v below p50 %v", res.LateP99, res.LateP50)
				}
				if res.Server == "" || len(res.Settings) == 0 {
					t.Errorf("server %q, settings %q; want both", res.Server, res.Settings)
				}
				if sys.Fsync != "" && !strings.Contains(strings.Join(res.Settings, "; "), "appendfsync "+sys.Fsync) {
					t.Errorf("settings %q do not say appendfsync %s", res.Settings, sys.Fsync)
				}
				if left := leftovers(t, o, p); len(left) > 0 {
					t.Errorf("left behind: %s", strings.Join(left, ", "))
				}
			})
		}
	}
}

// leftovers lists what p created on its server and did not delete.
func leftovers(t *testing.T, o Options, p peer) []string {
	t.Helper()
	ctx := context.Background()
	var left []string
	queuesLeft := func(queues ...string) {
		conn, err := amqp.Dial(o.AMQPURL)
		if err != nil {
			t.Fatalf("connect to check the queues: %v", err)
		}
		defer conn.Close()
		for _, q := range queues {
			if _, err := queueDepth(conn, q); err == nil {
				left = append(left, "queue "+q)
			} else if !strings.Contains(err.Error(), "NOT_FOUND") {
				t.Errorf("inspect queue %q: %v", q, err)
			}
		}
	}
	switch p := p.(type) {
	case *relayPeer:
		var names []string
		for _, q := range p.p.Topology().Plan().Queues {
			names = append(names, q.Name)
		}
		queuesLeft(names...)
	case *rawPeer:
		queuesLeft(p.work, p.wait, p.park)
	case *watermillPeer:
		queuesLeft(p.topic, p.poison)
	case *asynqPeer:
		rdb := redis.NewClient(&redis.Options{Addr: o.RedisAddr})
		defer rdb.Close()
		keys, err := rdb.Keys(ctx, "asynq:{"+p.queue+"}*").Result()
		if err != nil {
			t.Fatalf("list keys: %v", err)
		}
		left = append(left, keys...)
		if in, _ := rdb.SIsMember(ctx, "asynq:queues", p.queue).Result(); in {
			left = append(left, "asynq:queues member "+p.queue)
		}
	case *riverPeer:
		conn, err := pgx.Connect(ctx, o.PostgresDSN)
		if err != nil {
			t.Fatalf("connect to check the schema: %v", err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", p.schema).Scan(&n); err != nil {
			t.Fatalf("look for the schema: %v", err)
		}
		if n > 0 {
			left = append(left, "schema "+p.schema)
		}
	default:
		t.Fatalf("no leftover check for %T", p)
	}
	return left
}

// TestTimeoutIsAFailedRow runs the raw loop with a timeout far too short
// for its jobs: the result must say so, not hang.
func TestTimeoutIsAFailedRow(t *testing.T) {
	o := testOptions(t)
	needServer(t, RabbitMQ, o)
	o.Timeout = 300 * time.Millisecond
	w := DefaultWorkload
	w.Jobs, w.FailRate, w.Delay = 50, 1, time.Second // every job waits 1s per retry
	sys, _ := systemNamed("raw")
	p := sys.New(o, w)
	began := time.Now()
	res := runPeer(context.Background(), sys, p, o, w, io.Discard)
	if !strings.Contains(res.Err, "timeout after 300ms") {
		t.Errorf("Err = %q, want a timeout", res.Err)
	}
	if took := time.Since(began); took > cleanupTimeout {
		t.Errorf("the timed-out run took %v", took)
	}
	if left := leftovers(t, o, p); len(left) > 0 {
		t.Errorf("left behind: %s", strings.Join(left, ", "))
	}
}

// TestParent runs the command as make bench-peers does, with one system
// in a child process, and checks the section it writes.
func TestParent(t *testing.T) {
	o := testOptions(t)
	needServer(t, RabbitMQ, o)
	t.Setenv("PEERS_TEST_CHILD", "1") // the children, this binary, run the command
	out := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := os.WriteFile(out, []byte("# Benchmarks\n\nrelay-lab bench's part\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"--systems", "raw", "--jobs", "200", "--timeout", "90s", "--settle", "100ms", "--out", out}
	if err := Run(context.Background(), args, os.Getenv, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	doc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Benchmarks\n\nrelay-lab bench's part\n\n" + section.PeersStart, "| raw amqp091-go | ", "| 200 / 0 / 0 / 0 |", section.PeersEnd + "\n"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("the document lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(string(doc), "| raw amqp091-go | failed") {
		t.Errorf("the raw row failed:\n%s\n%s", doc, stderr.String())
	}
	if !strings.Contains(stderr.String(), "[1/1] raw amqp091-go: 200 jobs") {
		t.Errorf("no progress line for the start:\n%s", stderr.String())
	}
}

// need43 ends a test of a system that runs on RabbitMQ 4.3 or later only
// when the broker is older (testenv.Lacks: a skip, except where
// RELAY_EXPECT_BACKENDS names native, as make test-compat sets it for its
// 4.3 node; make bench-peers BROKER=4.3 runs it on a 4.3 node too).
func need43(t *testing.T, url string) {
	t.Helper()
	conn, err := retry.Dial(url, "bench-peers test version")
	if err != nil {
		t.Fatalf("dial the broker: %v", err)
	}
	version, _ := conn.Properties["version"].(string)
	conn.Close()
	if !retry.VersionAtLeast(version, 4, 3) {
		testenv.Lacks(t, string(retry.Native), "needs RabbitMQ 4.3 or later; the broker is %s", version)
	}
}
