// Package peers runs the same retry workload on relay, a raw amqp091-go
// DLX loop, asynq, River and watermill-amqp, one child process per
// system, and writes the comparison into docs/benchmarks.md: `make
// bench-peers`, through cmd/relay-peers. It is in the lab's module, so
// that asynq, River and watermill never enter relay's go.mod.
package peers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"

	"github.com/relay-demo/relay/lab/internal/section"
	"github.com/relay-demo/relay/retry"
)

// Run is the whole command: a child when --system names a system, else the
// parent that runs every system in a child of its own, each started as
// this process's own executable with --system.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if o.System != "" {
		return runChild(ctx, o, stdout, stderr)
	}
	return runParent(ctx, o, getenv, stdout, stderr)
}

// runChild runs one system in this process and prints its result as JSON.
// A failed run is a result with Err, not an error: the parent reports it
// as the row's failure.
func runChild(ctx context.Context, o Options, stdout, stderr io.Writer) error {
	sys, _ := systemNamed(o.System)
	if o.CPUProfile != "" {
		f, err := os.Create(filepath.Join(o.CPUProfile, sys.Name+".pprof"))
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	res := runPeer(ctx, sys, sys.New(o, o.Workload), o, o.Workload, stderr)
	return json.NewEncoder(stdout).Encode(res)
}

// childGrace is how long the parent gives a child past its own timeout
// (its workers' stop and its cleanup included) before killing it.
const childGrace = cleanupTimeout + 30*time.Second

// runParent runs each system in a child process, one after another, and
// writes the report.
func runParent(ctx context.Context, o Options, getenv func(string) string, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program to run the systems: %w", err)
	}
	began := time.Now()
	if !o.SystemsGiven {
		o.Systems = runnable(o.Systems, o.AMQPURL, stderr)
	}
	rep := Report{Section: o.Section, Command: command(getenv, o.Section), Machine: machine(), Workload: o.Workload}
	for i, name := range o.Systems {
		sys, _ := systemNamed(name)
		jobs := o.Jobs
		if name == "watermill" && o.WatermillJobs > 0 {
			jobs = o.WatermillJobs
		}
		fmt.Fprintf(stderr, "[%d/%d] %s: %s jobs, timeout %s\n", i+1, len(o.Systems), sys.Title, thousands(jobs), o.Timeout)
		res := runSystem(ctx, exe, o, sys, jobs, stderr)
		if res.Err != "" {
			fmt.Fprintf(stderr, "[%d/%d] %s failed after %s: %s\n", i+1, len(o.Systems), sys.Title, res.Wall.Round(100*time.Millisecond), res.Err)
		} else {
			fmt.Fprintf(stderr, "[%d/%d] %s: %s jobs/s, lateness p50 %s p99 %s, %s retries, %s parked, %s lost, %s duplicates (%s)\n",
				i+1, len(o.Systems), sys.Title, thousands(int(res.JobsPerSecond()+0.5)), ms(res.LateP50), ms(res.LateP99),
				thousands(res.Retries), thousands(res.Parked), thousands(res.Lost), thousands(res.Duplicates), res.Wall.Round(100*time.Millisecond))
		}
		rep.Results = append(rep.Results, res)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	rep.Servers = servers(rep.Results)
	rep.Notes = notes(ctx, o, rep.Results)
	rep.Took = time.Since(began)
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if o.Out != "" {
		if err := writeSection(o.Out, md, o.Section); err != nil {
			return fmt.Errorf("write the report: %w", err)
		}
		start, _ := section.Peers(o.Section)
		fmt.Fprintf(stderr, "wrote the section %s of %s\n", start, o.Out)
	}
	return nil
}

// amqpPort is the port of an AMQP URL, explicit or the scheme's default.
func amqpPort(raw string) int {
	u, err := url.Parse(raw)
	if err != nil {
		return 0
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if u.Scheme == "amqps" {
		return 5671
	}
	return 5672
}

// runnable drops from the default list the systems the broker at url
// cannot run (relay's native backend before RabbitMQ 4.3), saying so. A
// broker that does not answer keeps the list: its systems fail on their own.
func runnable(names []string, url string, stderr io.Writer) []string {
	conn, err := retry.Dial(url, "bench-peers version")
	if err != nil {
		return names
	}
	version, _ := conn.Properties["version"].(string)
	conn.Close()
	var out []string
	for _, name := range names {
		if sys, _ := systemNamed(name); sys.Needs43 && !retry.VersionAtLeast(version, 4, 3) {
			fmt.Fprintf(stderr, "%s left out: it needs RabbitMQ 4.3 or later, and the broker is %s\n", sys.Title, version)
			continue
		}
		out = append(out, name)
	}
	return out
}

// runSystem runs sys in a child process, on a redis-server of its own for
// a system with an appendfsync policy, started before and stopped after.
func runSystem(ctx context.Context, exe string, o Options, sys system, jobs int, stderr io.Writer) Result {
	if sys.Fsync == "" {
		return runChildProcess(ctx, exe, o, sys, jobs, stderr)
	}
	srv, err := startRedis(ctx, sys.Fsync)
	if err != nil {
		return Result{Name: sys.Name, Title: sys.Title, Workload: o.Workload, Err: err.Error()}
	}
	o.RedisAddr = srv.Addr
	res := runChildProcess(ctx, exe, o, sys, jobs, stderr)
	if err := srv.Stop(); err != nil {
		res.Err = strings.TrimPrefix(res.Err+"; "+err.Error(), "; ")
	}
	return res
}

// runChildProcess runs sys in a child process of exe, measures the child
// from the outside (its rusage, the server's CPU time around it), and
// returns its result; a child that fails, hangs past its timeout or
// prints no result is a result with Err.
func runChildProcess(ctx context.Context, exe string, o Options, sys system, jobs int, stderr io.Writer) Result {
	w := o.Workload
	w.Jobs = jobs
	res := Result{Name: sys.Name, Title: sys.Title, Workload: w}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout+childGrace)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, o.childArgs(sys.Name, jobs)...)
	cmd.Env = o.childEnv(os.Environ())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second // then killed

	var only map[string]bool
	switch sys.Server {
	case RabbitMQ:
		only = listeners(RabbitMQ.comm(), amqpPort(o.AMQPURL))
	case Redis:
		only = listeners(Redis.comm(), port(o.RedisAddr))
	}
	before, okBefore := serverCPU(sys.Server, only)
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	after, okAfter := serverCPU(sys.Server, only)

	if line := lastLine(out.Bytes()); len(line) > 0 {
		if jerr := json.Unmarshal(line, &res); jerr != nil && err == nil {
			err = fmt.Errorf("read the child's result: %w", jerr)
		}
	} else if err == nil {
		err = errors.New("the child printed no result")
	}
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.Err = fmt.Sprintf("timeout: killed after %s", wall.Round(time.Second))
	case err != nil && res.Err == "":
		res.Err = err.Error()
	}
	res.Wall = wall
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			res.ClientCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			res.PeakRSS = uint64(ru.Maxrss) << 10 // KiB on Linux
		}
	}
	res.ServerCPU, res.ServerCPUOK = after-before, okBefore && okAfter
	return res
}

// lastLine is the last non-empty line of b: the child's JSON.
func lastLine(b []byte) []byte {
	var last []byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			last = append(last[:0], l...)
		}
	}
	return last
}

// command is how the report says it was made.
func command(getenv func(string) string, section string) string {
	if getenv("MAKELEVEL") != "" {
		if section != "" {
			return "make bench-peers BROKER=" + section
		}
		return "make bench-peers"
	}
	return "relay-peers " + strings.Join(os.Args[1:], " ")
}

// machine describes this machine: CPU model, cores, Go, OS.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores, %s, %s/%s", model, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// servers lists the servers the results ran on, once each.
func servers(results []Result) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range results {
		if r.Server != "" && !seen[r.Server] {
			seen[r.Server] = true
			out = append(out, r.Server)
		}
	}
	return out
}

// notes states every difference in durability and polling, with the
// servers' settings read from the servers themselves.
func notes(ctx context.Context, o Options, results []Result) []string {
	ran := map[string]bool{}
	for _, r := range results {
		ran[r.Name] = true
	}
	var n []string
	n = append(n, "**relay** confirms every hand-off: the worker's (to the error stage, or in direct mode to the wait queue), the error stage's and the requeue stage's publishes each wait for the broker's publisher confirm before the message they came from is acked; messages are persistent, queues durable. The waiting is the broker's: a TTL wait queue dead-letters the message on, nothing polls. The broker's own dead-lettering (a wait queue's expiry, and the worker's fallback nack) is not confirmed: at-most-once on classic queues, at-least-once on quorum queues (x-dead-letter-strategy at-least-once), which is why relay recommends quorum. The retry count is relay's own x-retry-count header.")
	if ran["relay-native"] {
		n = append(n, "**relay (native, quorum)**: the retry is the queue's own: the worker rejects a failure and the quorum queue keeps the message in its Raft log, on disk, for the delay and delivers it again; nothing is published per retry and nothing polls. The retry count is the broker's x-delivery-count. The last failure is parked by a confirmed publish to the dead-letter queue before the ack; the delivery limit stays as the backstop, which dead-letters a message whose consumer died on its last attempt.")
	}
	if ran["raw-quorum"] || ran["raw-native"] {
		n = append(n, "**Each relay row against its own floor** (÷ own floor): the stages and direct rows on classic queues against the raw DLX loop on classic queues, the quorum rows against the same loop on quorum queues with relay's quorum arguments (x-dead-letter-strategy at-least-once, x-overflow reject-publish), the native row against a plain amqp091-go consumer rejecting on a quorum queue with relay's x-delayed-retry-* arguments. Each floor ran in the same run, on the same broker.")
	}
	n = append(n, "**raw amqp091-go**: the count is the broker's x-death, which it writes itself at each dead-lettering (the loop never republishes a message, so RabbitMQ 3.13's refusal of client-written x-death does not apply). Work → wait → work is the broker's dead-lettering, unconfirmed and at-most-once on classic queues; only the enqueue and the park are confirmed publishes. Nothing polls. Persistent messages on durable classic queues.")
	n = append(n, "On **RabbitMQ**, classic queues confirm a persistent message once it is written to disk (or already delivered and acked); quorum queues once a majority of their (here: one) replicas has it on disk.")
	n = append(n, "**asynq**: "+redisDurability(ctx, o.RedisAddr)+" A task waiting for its retry sits in a sorted set that asynq's forwarder polls every DelayedTaskCheckInterval ("+o.AsynqDelayedCheck.String()+" here, 5s by default: with the default a 100 ms retry starts about 2.5 s late on average); an idle processor looks for work every TaskCheckInterval ("+o.AsynqTaskCheck.String()+" here, 1s by default). asynq keeps a retry's due time in whole Unix seconds (the score of its retry set) and forwards a task once that second has begun: a 100 ms retry is due at the start of the second it falls in, so it starts early, at the forwarder's next check, unless it failed in the last 100 ms of a second. Its retries do not wait the delay they were given, which shortens its retry chains; its lateness is negative. A task in progress is leased; a dead worker's tasks come back when the lease expires.")
	if ran["asynq-always"] || ran["asynq-everysec"] {
		n = append(n, "**asynq (appendfsync always / everysec)**: the same asynq on a redis-server of the run's own (its own loopback port and a temporary directory, started before the row and stopped after), with appendonly yes and no snapshots. At appendfsync always Redis writes and fsyncs every change to its append-only file before it replies: an enqueue, a retry or a completion is on disk when asynq goes on, the durability relay's publisher confirms give. At everysec the write precedes the reply but the fsync comes within the second: a crash of the machine loses up to a second of changes.")
		n = append(n, "**Which rows are comparable**: relay's rows and River hold what they were handed on disk before they acknowledge it (relay: the broker's publisher confirm, which follows its disk write; River: a committed transaction, with PostgreSQL's settings above), as do the raw loops for their enqueue and park (their retries are the broker's own dead-lettering, see above); of asynq's rows only appendfsync always does. asynq on Redis without persistence and at everysec keep less on disk than the others and are not comparable in durability; they stay as asynq's figure as it is usually run. The ÷ asynq, fsync always column is the comparison at equal durability.")
	}
	n = append(n, "**River**: "+postgresDurability(ctx, o.PostgresDSN)+" Every state change is a committed transaction, but River's completer batches completions and writes them shortly after the handler returns. A retry due within the scheduler interval (5s, River's default, which its Config does not expose) is set back to available at once, with scheduled_at in the future (River's eager retry); only longer delays wait for the leader's JobScheduler, which moves due retryable jobs to available every 5s. A fetch locks available jobs whose scheduled_at has passed, oldest scheduled_at first, at most MaxWorkers less those running; fetches run after a job completes (at most every FetchCooldown, "+o.RiverCooldown.String()+" here, 100ms by default) and every FetchPollInterval ("+o.RiverPoll.String()+" here, 1s by default); its LISTEN/NOTIFY only signals inserts. A retry's scheduled_at is later than every job enqueued before it, so its lateness is the backlog ahead of it over River's rate, and the rate is at most MaxWorkers jobs per FetchCooldown and fetch (its doc: \"Throughput is limited by this value\")"+riverCooldownWhy(o.RiverCooldown)+".")
	n = append(n, "**watermill-amqp**: the Retry middleware sleeps in the handler, holding the unacked delivery (prefetch 1) and the handler for every delay: a handler does nothing else meanwhile, so with a fixed number of handlers the rate falls with the delay. The attempt count lives only in the worker's memory: a crash or disconnect redelivers the message and its retries start again. The poison-queue publish is confirmed before the ack. No polling, no broker-side delay.")
	if ran["watermill"] && o.WatermillJobs > 0 && o.WatermillJobs != o.Jobs {
		n = append(n, fmt.Sprintf("watermill-amqp ran %s jobs instead of %s (--watermill-jobs) to stay within the timeout; its jobs/s is comparable, its totals are not.", thousands(o.WatermillJobs), thousands(o.Jobs)))
	}
	n = append(n, "Retry lateness here is mostly queueing: every job is enqueued before the clock starts, so a retry goes back to the end of its queue, behind every first attempt not yet started, on every system (asynq's and River's due retries too). Only the last retries, once that backlog is gone, show the delay mechanism alone; a system that works its queue faster has the lower lateness.")
	n = append(n, "The machine's cores are shared by the client, the server and anything else running: the server CPU column counts the server's work for other clients too, and every figure moves from run to run.")
	return n
}

// redisDurability says what this Redis keeps on disk, read with CONFIG GET.
func redisDurability(ctx context.Context, addr string) string {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	save, err1 := rdb.ConfigGet(ctx, "save").Result()
	aof, err2 := rdb.ConfigGet(ctx, "appendonly").Result()
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Sprintf("Redis's persistence could not be read (%v).", err)
	}
	if save["save"] == "" && aof["appendonly"] == "no" {
		return "Redis here runs without persistence (save \"\", appendonly no): it keeps nothing on disk, and a restart loses every queued and waiting task; an enqueue is acknowledged once the task is in memory."
	}
	return fmt.Sprintf("Redis here has save %q and appendonly %s: an enqueue is acknowledged once the task is in memory, before any write to disk.", save["save"], aof["appendonly"])
}

// postgresDurability says how this PostgreSQL commits, read with SHOW.
func postgresDurability(ctx context.Context, dsn string) string {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Sprintf("PostgreSQL's settings could not be read (%v).", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var fsync, sync string
	if err := conn.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit')").Scan(&fsync, &sync); err != nil {
		return fmt.Sprintf("PostgreSQL's settings could not be read (%v).", err)
	}
	if fsync == "on" && sync != "off" {
		return fmt.Sprintf("PostgreSQL here has fsync %s and synchronous_commit %s: a committed insert or state change is on disk.", fsync, sync)
	}
	return fmt.Sprintf("PostgreSQL here has fsync %s and synchronous_commit %s: a commit returns before its write reaches the disk.", fsync, sync)
}

// riverCooldownWhy says why River's FetchCooldown is what it is, when it
// is its least allowed value.
func riverCooldownWhy(cooldown time.Duration) string {
	if cooldown != river.FetchCooldownMin {
		return ""
	}
	return ", which is why it runs at its least allowed value here"
}
