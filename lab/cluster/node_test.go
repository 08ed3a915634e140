//go:build cluster

package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/relay-demo/relay/internal/testenv"
)

// nodePrefix starts the name of every node the test runs; no other
// broker on the machine may use it.
const nodePrefix = "relay-c"

// dirPattern names the test's directories, under os.TempDir.
const dirPattern = "relay-cluster-*"

// brokerUser runs the nodes: the user of the machine's RabbitMQ, whose
// Erlang cookie rabbitmqctl presents.
const brokerUser = "rabbitmq"

// ours matches the epmd name of a node of the test.
var ours = regexp.MustCompile(`^` + nodePrefix + `[0-9]+$`)

// clusterEPMD is the port of the epmd the nodes register with when they
// run from a root of deploy/broker.sh: one of the test's own, away from
// the default broker's (4369) and from deploy/broker.sh's (43x0).
const clusterEPMD = 4383

// cluster is the test's RabbitMQ cluster: its nodes, run as brokerUser
// from the local installation, or with RELAY_BROKER=VERSION from that
// version's root of deploy/broker.sh (chrooted there), under a directory
// of its own.
type cluster struct {
	t       *tee
	version string // RELAY_BROKER; empty: the local installation
	root    string // the root the nodes run in; empty: /
	epmd    int    // the port of the nodes' epmd
	bin     string // the directory of rabbitmq-server and the CLI tools, in the root
	dir     string // in the root
	home    string // brokerUser's home, where its Erlang cookie is
	cred    *syscall.Credential
	nodes   []*node
}

// host is where path, a path in the nodes' root, is on this machine.
func (c *cluster) host(path string) string { return filepath.Join(c.root, path) }

// sysProcAttr runs a process of the cluster as brokerUser, in the root.
func (c *cluster) sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: c.cred, Chroot: c.root}
}

// node is one RabbitMQ node of the cluster.
type node struct {
	c          *cluster
	name       string // relay-c1@localhost
	port, dist int    // AMQP and Erlang distribution ports
	dir        string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	pid  int           // the Erlang VM's OS process, read after each start
}

// needCluster skips the test (fails it under CI=true, as
// testenv.Unavailable does) when this machine cannot run RabbitMQ nodes of
// its own, and returns what it needs to.
func needCluster(t *tee) *cluster {
	t.Helper()
	c := &cluster{t: t, epmd: 4369, version: os.Getenv("RELAY_BROKER")}
	if c.version != "" {
		return c.inRoot()
	}
	server := "/usr/lib/rabbitmq/bin/rabbitmq-server"
	if _, err := os.Stat(server); err != nil {
		// Elsewhere than Debian's package, the script on PATH is the
		// server itself.
		if server, err = exec.LookPath("rabbitmq-server"); err != nil {
			testenv.Unavailable(t, "the cluster test runs nodes from the local rabbitmq-server package: %v", err)
		}
	}
	c.bin = filepath.Dir(server)
	for _, tool := range []string{"rabbitmqctl", "rabbitmq-diagnostics"} {
		if _, err := os.Stat(filepath.Join(c.bin, tool)); err != nil {
			testenv.Unavailable(t, "the cluster test controls its nodes with %s: %v", tool, err)
		}
	}
	u, err := user.Lookup(brokerUser)
	if err != nil {
		testenv.Unavailable(t, "the cluster test runs its nodes as the %s user: %v", brokerUser, err)
	}
	c.home = u.HomeDir
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	switch os.Geteuid() {
	case uid:
	case 0:
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	default:
		testenv.Unavailable(t, "the cluster test runs as root or %s, to share that user's Erlang cookie with rabbitmqctl", brokerUser)
	}
	return c
}

// inRoot readies the cluster to run its nodes from the root of
// deploy/broker.sh's RabbitMQ c.version, mounted for as long as the test
// runs (the script leaves it mounted while another node runs from it).
func (c *cluster) inRoot() *cluster {
	c.t.Helper()
	if os.Geteuid() != 0 {
		testenv.Unavailable(c.t, "the cluster test runs RabbitMQ %s nodes from deploy/broker.sh's root, which needs root", c.version)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "deploy", "broker.sh"))
	if err != nil {
		testenv.Unavailable(c.t, "%v", err)
	}
	out, err := exec.Command(script, "mount", c.version).Output()
	if err != nil {
		testenv.Unavailable(c.t, "deploy/broker.sh mount %s: %v", c.version, err)
	}
	c.root = strings.TrimSpace(string(out))
	c.t.Cleanup(func() {
		if out, err := exec.Command(script, "unmount", c.version).CombinedOutput(); err != nil {
			c.t.Errorf("deploy/broker.sh unmount %s: %v: %s", c.version, err, out)
		}
	})
	c.epmd, c.bin = clusterEPMD, "/usr/lib/rabbitmq/bin"
	for _, tool := range []string{"rabbitmq-server", "rabbitmqctl", "rabbitmq-diagnostics", "rabbitmq-queues", "epmd"} {
		path := filepath.Join(c.bin, tool)
		if tool == "epmd" {
			path = "/usr/bin/epmd"
		}
		if _, err := os.Stat(c.host(path)); err != nil {
			testenv.Unavailable(c.t, "the RabbitMQ %s root %s lacks %s: %v", c.version, c.root, tool, err)
		}
	}
	uid, gid, home, err := passwd(c.host("/etc/passwd"), brokerUser)
	if err != nil {
		testenv.Unavailable(c.t, "the RabbitMQ %s root: %v", c.version, err)
	}
	c.home, c.cred = home, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return c
}

// passwd reads a user's ids and home from a passwd file.
func passwd(file, name string) (uid, gid int, home string, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 6 && f[0] == name {
			uid, err1 := strconv.Atoi(f[2])
			gid, err2 := strconv.Atoi(f[3])
			if err := errors.Join(err1, err2); err != nil {
				return 0, 0, "", fmt.Errorf("%s: %q: %w", file, line, err)
			}
			return uid, gid, f[5], nil
		}
	}
	return 0, 0, "", fmt.Errorf("no user %s in %s", name, file)
}

// startEPMD starts the nodes' own epmd, in the root, when they have one.
func (c *cluster) startEPMD() error {
	if c.root == "" {
		return nil
	}
	cmd := exec.Command("/usr/bin/epmd", "-daemon", "-port", strconv.Itoa(c.epmd), "-address", "127.0.0.1")
	cmd.Dir, cmd.Env, cmd.SysProcAttr = "/", c.env(), c.sysProcAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("start epmd on port %d: %w: %s", c.epmd, err, out)
	}
	// epmd -daemon returns before the daemon listens.
	var err error
	if !poll(10*time.Second, 100*time.Millisecond, func() bool { _, err = epmdNames(c.epmd); return err == nil }) {
		return fmt.Errorf("epmd on port %d does not answer: %w", c.epmd, err)
	}
	return nil
}

// stopEPMD stops the nodes' own epmd once no node is registered with it.
func (c *cluster) stopEPMD() {
	if c.root == "" {
		return
	}
	cmd := exec.Command("/usr/bin/epmd", "-port", strconv.Itoa(c.epmd), "-kill")
	cmd.Dir, cmd.Env, cmd.SysProcAttr = "/", c.env(), c.sysProcAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Logf("stop epmd on port %d: %v: %s", c.epmd, err, out)
	}
}

// startCluster starts three nodes, joins the second and third to the
// first, and waits until the cluster runs all three. Whatever happens
// next, the nodes are stopped and their directory removed when the test
// ends, and on SIGINT or SIGTERM.
func startCluster(t *tee, size int) *cluster {
	t.Helper()
	c := needCluster(t)
	if err := c.startEPMD(); err != nil {
		t.Fatal(err)
	}
	c.sweep()
	dir, err := os.MkdirTemp(c.host(os.TempDir()), strings.TrimSuffix(dirPattern, "*"))
	if err != nil {
		t.Fatal(err)
	}
	c.dir = strings.TrimPrefix(dir, c.root)
	t.Cleanup(c.remove)
	stopSignals := c.onSignal()
	t.Cleanup(stopSignals)

	ports := freePorts(t, 2*size)
	for i := range size {
		n := &node{c: c, name: fmt.Sprintf("%s%d@localhost", nodePrefix, i+1), port: ports[2*i], dist: ports[2*i+1],
			dir: filepath.Join(c.dir, fmt.Sprintf("%s%d", nodePrefix, i+1))}
		if err := n.write(); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
	}
	if err := c.chown(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	errs := make([]error, size)
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() {
			if errs[i] = n.start(); errs[i] == nil {
				errs[i] = n.waitUp(2 * time.Minute)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes[1:] {
		if err := n.join(c.nodes[0]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.waitWhole(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster of %d nodes up in %s: %s", size, time.Since(start).Round(100*time.Millisecond), c)
	return c
}

// String lists the nodes with their AMQP ports.
func (c *cluster) String() string {
	var s []string
	for _, n := range c.nodes {
		s = append(s, fmt.Sprintf("%s (amqp %d)", n.name, n.port))
	}
	return strings.Join(s, ", ")
}

// urls are the nodes' AMQP URLs, AMQP_URLS's entries.
func (c *cluster) urls() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.url())
	}
	return out
}

// node returns the node of that name.
func (c *cluster) node(name string) *node {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// freePorts returns n distinct loopback ports free at the moment.
func freePorts(t *tee, n int) []int {
	t.Helper()
	var out []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out
}

// write creates the node's directory and configuration. Everything the
// node reads or writes is there: none of the machine's broker files, in
// /etc/rabbitmq or /var/lib/rabbitmq, is used, the Erlang cookie aside.
func (n *node) write() error {
	for _, d := range []string{n.dir, filepath.Join(n.dir, "mnesia"), filepath.Join(n.dir, "log")} {
		if err := os.MkdirAll(n.c.host(d), 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		"rabbitmq.conf": fmt.Sprintf(`listeners.tcp.1 = 127.0.0.1:%d
log.file.level = info
log.connection.level = warning
`, n.port),
		// No plugin: the machine's enabled_plugins turns the management
		// UI on, on the default broker's port.
		"enabled_plugins": "[].\n",
		// Read instead of /etc/rabbitmq/rabbitmq-env.conf, which names
		// the default broker's node.
		"rabbitmq-env.conf": "",
	}
	for name, body := range files {
		if err := os.WriteFile(n.c.host(filepath.Join(n.dir, name)), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// chown gives the cluster's directory to brokerUser.
func (c *cluster) chown() error {
	if c.cred == nil {
		return nil
	}
	return filepath.WalkDir(c.host(c.dir), func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(c.cred.Uid), int(c.cred.Gid))
	})
}

// env is the environment of the node's server and of the CLI tools.
func (c *cluster) env(extra ...string) []string {
	path := os.Getenv("PATH")
	if c.root != "" {
		path = "/usr/sbin:/usr/bin:/sbin:/bin"
	}
	return append([]string{
		"HOME=" + c.home, "PATH=" + path, "LANG=C.UTF-8", "LC_ALL=C.UTF-8",
		"ERL_EPMD_ADDRESS=127.0.0.1", "ERL_EPMD_PORT=" + strconv.Itoa(c.epmd),
	}, extra...)
}

func (n *node) env() []string {
	return n.c.env(
		"RABBITMQ_NODENAME="+n.name,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(n.port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(n.dist),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(n.dir, "rabbitmq-env.conf"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(n.dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(n.dir, "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(n.dir, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(n.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(n.dir, "log"),
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
	)
}

func (n *node) url() string { return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", n.port) }

// short is the node's name without the host.
func (n *node) short() string { name, _, _ := strings.Cut(n.name, "@"); return name }

// start starts the node's server in the foreground, in a process group
// of its own. If the test process dies, the server script gets SIGTERM
// and stops the node.
func (n *node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done != nil {
		select {
		case <-n.done:
		default:
			return fmt.Errorf("start %s: it is running", n.name)
		}
	}
	out, err := os.OpenFile(n.c.host(filepath.Join(n.dir, "server.out")), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(filepath.Join(n.c.bin, "rabbitmq-server"))
	cmd.Dir = n.dir
	cmd.Env = n.env()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = n.c.sysProcAttr()
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pdeathsig = true, syscall.SIGTERM
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	n.cmd, n.done, n.pid = cmd, done, 0
	return nil
}

// exited reports whether the node's server has exited (or never ran).
func (n *node) exited() bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// waitExit waits at most timeout for the node's server to exit.
func (n *node) waitExit(timeout time.Duration) bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// reachable reports whether the node takes an AMQP connection now.
func reachable(url string) bool {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// waitUp waits until the node takes AMQP connections (a node opens its
// listeners last), then reads the OS process of its Erlang VM.
func (n *node) waitUp(timeout time.Duration) error {
	if !poll(timeout, 250*time.Millisecond, func() bool { return n.exited() || reachable(n.url()) }) {
		return fmt.Errorf("%s does not take connections after %s; its log:\n%s", n.name, timeout, n.logTail())
	}
	if n.exited() {
		return fmt.Errorf("%s exited while starting; its log:\n%s", n.name, n.logTail())
	}
	out, err := n.c.ctl(time.Minute, "rabbitmqctl", "-n", n.name, "eval", "os:getpid().")
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.Trim(strings.TrimSpace(out), `"`))
	if err != nil {
		return fmt.Errorf("%s: os:getpid() = %q: %w", n.name, out, err)
	}
	n.mu.Lock()
	n.pid = pid
	n.mu.Unlock()
	return nil
}

// join makes the node a member of the cluster of seed.
func (n *node) join(seed *node) error {
	for _, args := range [][]string{{"stop_app"}, {"join_cluster", seed.name}, {"start_app"}} {
		if _, err := n.c.ctl(2*time.Minute, "rabbitmqctl", append([]string{"-n", n.name}, args...)...); err != nil {
			return err
		}
	}
	return n.waitUp(2 * time.Minute)
}

// kill ends the node's Erlang VM with SIGKILL, as a crash or the kernel's
// OOM killer would, and waits for its server to exit.
func (n *node) kill() error {
	n.mu.Lock()
	pid := n.pid
	n.mu.Unlock()
	if pid == 0 {
		return fmt.Errorf("kill %s: its OS process is not known", n.name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 %s (pid %d): %w", n.name, pid, err)
	}
	if !n.waitExit(30 * time.Second) {
		return fmt.Errorf("%s (pid %d) still runs 30s after SIGKILL", n.name, pid)
	}
	return nil
}

// stop stops the node gracefully with rabbitmqctl stop and waits for its
// server to exit.
func (n *node) stop() error {
	if _, err := n.c.ctl(2*time.Minute, "rabbitmqctl", "-n", n.name, "stop"); err != nil {
		return err
	}
	if !n.waitExit(time.Minute) {
		return fmt.Errorf("%s still runs a minute after rabbitmqctl stop", n.name)
	}
	return nil
}

// forceKill ends the node's process group and Erlang VM with SIGKILL:
// the fallback when stop does not.
func (n *node) forceKill() {
	n.mu.Lock()
	cmd, pid := n.cmd, n.pid
	n.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// logTail returns the end of the node's logs.
func (n *node) logTail() string {
	var b strings.Builder
	for _, f := range []string{filepath.Join(n.dir, "server.out"), filepath.Join(n.dir, "log", n.name+".log")} {
		fmt.Fprintf(&b, "--- %s\n%s\n", n.c.host(f), tail(n.c.host(f), 4<<10))
	}
	return b.String()
}

// ctl runs one of RabbitMQ's CLI tools as brokerUser, bounded in time,
// and returns its standard output.
func (c *cluster) ctl(timeout time.Duration, tool string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, tool), args...)
	cmd.Dir = "/"
	cmd.Env = c.env()
	cmd.SysProcAttr = c.sysProcAttr()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s %s", tool, strings.Join(args, " "), err, strings.TrimSpace(string(out)), strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// running lists the nodes the cluster runs, as node n sees it.
func (c *cluster) running(n *node) ([]string, error) {
	out, err := c.ctl(time.Minute, "rabbitmqctl", "-n", n.name, "-q", "cluster_status", "--formatter", "json")
	if err != nil {
		return nil, err
	}
	var st struct {
		Running []string `json:"running_nodes"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return nil, fmt.Errorf("cluster_status of %s: %w", n.name, err)
	}
	slices.Sort(st.Running)
	return st.Running, nil
}

// waitWhole waits until every node runs and sees the others running.
func (c *cluster) waitWhole(timeout time.Duration) error {
	var want []string
	for _, n := range c.nodes {
		want = append(want, n.name)
	}
	var last []string
	var lastErr error
	ok := poll(timeout, time.Second, func() bool {
		for _, n := range c.nodes {
			last, lastErr = c.running(n)
			if lastErr != nil || !slices.Equal(last, want) {
				return false
			}
		}
		return true
	})
	if !ok {
		return fmt.Errorf("the cluster is not whole after %s: running %q, want %q (%v)", timeout, last, want, lastErr)
	}
	return nil
}

// live returns a node that runs.
func (c *cluster) live() *node {
	for _, n := range c.nodes {
		if !n.exited() && reachable(n.url()) {
			return n
		}
	}
	return c.nodes[0]
}

// queueInfo is a queue as rabbitmqctl list_queues shows it.
type queueInfo struct {
	Name     string `json:"name"`
	Leader   string `json:"leader"`
	Messages int    `json:"messages"`
	Ready    int    `json:"messages_ready"`
	Unacked  int    `json:"messages_unacknowledged"`
}

// held is how many of the queue's messages are neither ready nor
// unacknowledged: in a quorum queue, the messages it dead-lettered whose
// forwarding its at-least-once dead-letter worker has not finished.
func (q queueInfo) held() int { return max(q.Messages-q.Ready-q.Unacked, 0) }

// restart stops the named node gracefully, starts it again and waits
// until the cluster is whole.
func (c *cluster) restart(name string) error {
	n := c.node(name)
	if n == nil {
		return fmt.Errorf("no node %q in the cluster", name)
	}
	if err := n.stop(); err != nil {
		return err
	}
	if err := n.start(); err != nil {
		return err
	}
	if err := n.waitUp(2 * time.Minute); err != nil {
		return err
	}
	return c.waitWhole(2 * time.Minute)
}

// moveLeader makes another member lead the quorum queue: it removes the
// leader's replica and adds it back, as an operator would with
// rabbitmq-queues. The new leader starts the queue's dead-letter worker
// afresh.
func (c *cluster) moveLeader(queue, leader string) error {
	n := c.live()
	if _, err := c.ctl(time.Minute, "rabbitmq-queues", "-n", n.name, "delete_member", queue, leader); err != nil {
		return err
	}
	_, err := c.ctl(time.Minute, "rabbitmq-queues", "-n", n.name, "add_member", queue, leader)
	return err
}

// queues lists the queues whose names start with prefix.
func (c *cluster) queues(prefix string) ([]queueInfo, error) {
	n := c.live()
	out, err := c.ctl(time.Minute, "rabbitmqctl", "-n", n.name, "-q", "list_queues", "name", "leader", "messages", "messages_ready", "messages_unacknowledged", "--formatter", "json")
	if err != nil {
		return nil, err
	}
	var all []queueInfo
	if err := json.Unmarshal([]byte(out), &all); err != nil {
		return nil, fmt.Errorf("list_queues on %s: %w", n.name, err)
	}
	var mine []queueInfo
	for _, q := range all {
		if strings.HasPrefix(q.Name, prefix) {
			mine = append(mine, q)
		}
	}
	return mine, nil
}

// leading returns the node that leads the most of the named queues, and
// how many of them it leads.
func (c *cluster) leading(prefix string, names []string) (*node, int, error) {
	qs, err := c.queues(prefix)
	if err != nil {
		return nil, 0, err
	}
	count := map[string]int{}
	for _, q := range qs {
		if slices.Contains(names, q.Name) {
			count[q.Leader]++
		}
	}
	var best *node
	for _, n := range c.nodes {
		if count[n.name] > 0 && (best == nil || count[n.name] > count[best.name]) {
			best = n
		}
	}
	if best == nil {
		return nil, 0, fmt.Errorf("no node leads any of %q: %v", names, qs)
	}
	return best, count[best.name], nil
}

// waitNotCritical waits until no quorum queue needs node n for its
// majority, so n may go down without any queue stopping.
func (c *cluster) waitNotCritical(n *node, timeout time.Duration) error {
	var lastErr error
	if !poll(timeout, time.Second, func() bool {
		_, lastErr = c.ctl(time.Minute, "rabbitmq-diagnostics", "-n", n.name, "-q", "check_if_node_is_quorum_critical")
		return lastErr == nil
	}) {
		return fmt.Errorf("%s is still quorum critical after %s: %v", n.name, timeout, lastErr)
	}
	return nil
}

// remove stops every node and deletes the cluster's directory, then
// checks that no node of the test is left.
func (c *cluster) remove() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() {
			if n.exited() {
				return
			}
			if err := n.stop(); err != nil {
				c.t.Logf("cleanup: %v; killing it", err)
				n.forceKill()
				if !n.waitExit(30 * time.Second) {
					c.t.Errorf("cleanup: %s survives SIGKILL", n.name)
				}
			}
		})
	}
	wg.Wait()
	if c.t.Failed() {
		for _, n := range c.nodes {
			c.t.Logf("logs of %s:\n%s", n.name, n.logTail())
		}
	}
	if c.dir != "" {
		if err := os.RemoveAll(c.host(c.dir)); err != nil {
			c.t.Errorf("cleanup: %v", err)
		}
	}
	var left []string
	poll(30*time.Second, 500*time.Millisecond, func() bool {
		left = c.leftovers()
		return len(left) == 0
	})
	if len(left) > 0 {
		c.t.Errorf("cleanup: nodes of the test still registered with epmd: %q", left)
		return
	}
	c.stopEPMD()
}

// onSignal stops the nodes and removes their directory when the test
// process is interrupted, which skips the test's cleanups. It returns the
// function that stops watching.
func (c *cluster) onSignal() func() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(os.Stderr, "cluster test: %s: killing the nodes and removing %s\n", s, c.dir)
			for _, n := range c.nodes {
				n.forceKill()
			}
			for _, n := range c.nodes {
				n.waitExit(10 * time.Second)
			}
			_ = os.RemoveAll(c.host(c.dir))
			c.stopEPMD()
			os.Exit(1)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
	}
}

// sweep stops nodes of the test that an earlier run, killed before its
// cleanup, left behind, and removes their directories. The nodes are found
// by name with epmd and stopped with rabbitmqctl, the directories by the
// name the test gives them; nothing else is touched.
func (c *cluster) sweep() {
	for _, name := range c.leftovers() {
		c.t.Logf("stopping %s@localhost, left by an earlier run", name)
		if _, err := c.ctl(2*time.Minute, "rabbitmqctl", "-n", name+"@localhost", "stop"); err != nil {
			c.t.Logf("%v", err)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(c.host(os.TempDir()), dirPattern))
	for _, d := range dirs {
		c.t.Logf("removing %s, left by an earlier run", d)
		if err := os.RemoveAll(d); err != nil {
			c.t.Logf("%v", err)
		}
	}
}

// leftovers lists the nodes of the test registered with epmd.
func (c *cluster) leftovers() []string {
	names, err := epmdNames(c.epmd)
	if err != nil {
		c.t.Logf("epmd: %v", err)
		return nil
	}
	var out []string
	for _, name := range names {
		if ours.MatchString(name) {
			out = append(out, name)
		}
	}
	return out
}

// epmdNames asks the local epmd on port (4369 by default) which nodes are
// registered with it (its NAMES_REQ request).
func epmdNames(port int) ([]string, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte{0, 1, 'n'}); err != nil {
		return nil, err
	}
	var answer [4]byte // epmd's own port
	if _, err := io.ReadFull(conn, answer[:]); err != nil {
		return nil, err
	}
	var names []string
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		// "name relay-c1 at port 25681"
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "name" {
			names = append(names, f[1])
		}
	}
	return names, sc.Err()
}

// defaultBroker is what the test records of the machine's own broker, to
// show it was left as it was found.
type defaultBroker struct {
	Running bool
	PID     string
	Nodes   []string // the nodes of its cluster
	Uptime  int
}

func (d defaultBroker) String() string {
	if !d.Running {
		return "not running"
	}
	return fmt.Sprintf("pid %s, cluster %q, up %ds", d.PID, d.Nodes, d.Uptime)
}

// same reports whether after is the broker d was: the same process in
// the same cluster, or still not running.
func (d defaultBroker) same(after defaultBroker) bool {
	return d.Running == after.Running && d.PID == after.PID && slices.Equal(d.Nodes, after.Nodes) && after.Uptime >= d.Uptime
}

// readDefault reads the machine's own broker's state with its own
// rabbitmqctl settings (no -n: the node /etc/rabbitmq names).
func readDefault() defaultBroker {
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "rabbitmqctl", args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return string(out), err
	}
	var d defaultBroker
	out, err := run("-q", "status", "--formatter", "json")
	if err != nil {
		return d
	}
	var st struct {
		PID    json.Number `json:"pid"`
		Uptime int         `json:"uptime"`
	}
	if json.Unmarshal([]byte(out), &st) != nil {
		return d
	}
	d.Running, d.PID, d.Uptime = true, st.PID.String(), st.Uptime
	if out, err = run("-q", "cluster_status", "--formatter", "json"); err == nil {
		var cs struct {
			Disk []string `json:"disk_nodes"`
			RAM  []string `json:"ram_nodes"`
		}
		if json.Unmarshal([]byte(out), &cs) == nil {
			d.Nodes = append(cs.Disk, cs.RAM...)
			slices.Sort(d.Nodes)
		}
	}
	return d
}

// poll checks cond every interval until it holds (true) or timeout passes
// (false).
func poll(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tk.C
	}
	return true
}

// tail returns at most the last n bytes of a file.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
