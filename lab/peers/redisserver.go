package main

import (
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
// until it answers, at most for a deadline.
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
	port, err := freePort()
	if err != nil {
		return nil, err
	}
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
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	s.exited = exited

	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		perr := rdb.Ping(ctx).Err()
		if perr == nil {
			return s, nil
		}
		select {
		case err := <-exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redis-server on %s exited before it answered: %v", s.Addr, err)
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

// freePort is a loopback TCP port nothing listens on now.
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
