package peers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server of the run's own on a loopback port, with
// its data in a temporary directory: asynq measured with Redis writing
// every change to its append-only file, the durability relay's confirms
// give, without touching the Redis others share.
type redisServer struct {
	Addr   string
	dir    string
	cmd    *exec.Cmd
	exited <-chan error
}

// startRedis starts redis-server with appendonly yes and the given
// appendfsync policy (always, everysec), no RDB snapshots, and polls it
// until it answers, at most for a deadline. redis-server binds the port
// it is told: one found free, which another program may take meanwhile;
// a server that finds it taken is started again on another, portAttempts
// times at most.
func startRedis(ctx context.Context, fsync string) (*redisServer, error) {
	switch fsync {
	case "always", "everysec", "no":
	default:
		return nil, fmt.Errorf("appendfsync %q: want always, everysec or no", fsync)
	}
	exe, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server for the appendfsync %s row: %w", fsync, err)
	}
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := startRedisOn(ctx, exe, fsync, port)
		if !errors.Is(err, errPortTaken) || attempt == portAttempts {
			return s, err
		}
	}
}

// portAttempts is how many ports startRedis tries.
const portAttempts = 3

// errPortTaken is why a redis-server stopped whose port another program
// took first.
var errPortTaken = errors.New("port taken")

// startRedisOn starts redis-server on port, as startRedis does.
func startRedisOn(ctx context.Context, exe, fsync string, port int) (*redisServer, error) {
	dir, err := os.MkdirTemp("", "peers-redis-")
	if err != nil {
		return nil, fmt.Errorf("redis data directory: %w", err)
	}
	s := &redisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
	s.cmd = exec.Command(exe,
		"--bind", "127.0.0.1",
		"--port", strconv.Itoa(port),
		"--dir", dir,
		"--save", "",
		"--appendonly", "yes",
		"--appendfsync", fsync,
		"--daemonize", "no",
		"--logfile", "",
		"--loglevel", "warning",
	)
	// Its log, read once it has exited: what it says when it cannot bind.
	var out bytes.Buffer
	s.cmd.Stdout, s.cmd.Stderr = &out, &out
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	s.exited = exited

	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		// A ping of its own deadline: on a port another program holds
		// and never answers on, the server's exit is seen at once.
		pctx, cancelPing := context.WithTimeout(ctx, 500*time.Millisecond)
		perr := rdb.Ping(pctx).Err()
		cancelPing()
		if perr == nil {
			return s, nil
		}
		select {
		case err := <-exited:
			os.RemoveAll(dir)
			if bytes.Contains(out.Bytes(), []byte("Address already in use")) {
				err = errors.Join(err, errPortTaken)
			}
			return nil, fmt.Errorf("redis-server on %s exited before it answered: %w: %s", s.Addr, err, bytes.TrimSpace(out.Bytes()))
		case <-ctx.Done():
			return nil, errors.Join(fmt.Errorf("redis-server on %s does not answer: %w", s.Addr, perr), s.Stop())
		case <-tick.C:
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL past a deadline) and
// removes its data.
func (s *redisServer) Stop() error {
	defer os.RemoveAll(s.dir)
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop redis-server on %s: %w", s.Addr, err)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("redis-server on %s did not stop within 10s: killed", s.Addr)
	}
}

// freePort is a loopback TCP port nothing listens on now: one another
// program may take before redis-server binds it (startRedis tries again).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// port is the port of a host:port address, 0 if it has none.
func port(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}
