//go:build faults

package faults_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestKill9 runs `relay all` as a child process, kills it with SIGKILL
// twice while 1,000 notifications flow, starts it again each time, and
// checks that every accepted copy ends delivered or parked. The
// downstreams run in the test process, so they see every delivery of
// every run.
func TestKill9(t *testing.T) {
	r := newRig(t, defaults())
	bin := buildRelay(t)
	p := r.startChild(bin)

	const n = 1000
	l := r.send(n, 8, 100, 3*time.Minute)
	r.waitAccepted(l, n*3/10, time.Minute)
	p.kill()
	p = r.startChild(bin)
	r.waitAccepted(l, n*7/10, time.Minute)
	p.kill()
	p = r.startChild(bin)
	r.finish(l, false, 2*time.Minute)
	r.settle("kill -9", l, 2*time.Minute)
	p.stop()
}

// buildRelay builds the relay binary into the test's temporary directory.
func buildRelay(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "relay")
	cmd := exec.Command(gobin, "build", "-o", bin, "./cmd/relay")
	// In the root module, whose requirements are the binary's.
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// childProcess is `relay all` running as a child of the test process.
type childProcess struct {
	t   *testing.T
	cmd *exec.Cmd
	// done is closed once the process has exited; err is then its end.
	done chan struct{}
	err  error
}

// startChild starts `relay all` from bin with the rig's environment and
// waits until its API is ready.
func (r *rig) startChild(bin string) *childProcess {
	r.t.Helper()
	logs := r.logFile()
	cmd := exec.Command(bin, "all")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range r.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = child()
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	logs.Close()
	p := &childProcess{t: r.t, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	r.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	r.waitReady(30 * time.Second)
	r.t.Logf("relay all started, pid %d", cmd.Process.Pid)
	return p
}

// kill ends the process with SIGKILL and waits for it.
func (p *childProcess) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatalf("kill relay: %v", err)
	}
	<-p.done
	p.t.Logf("relay all killed with SIGKILL, pid %d", p.cmd.Process.Pid)
}

// stop ends the process with SIGTERM, as a supervisor would, and checks
// that it shuts down cleanly within a minute.
func (p *childProcess) stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("stop relay: %v", err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			p.t.Errorf("relay all after SIGTERM: %v", p.err)
		}
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
		p.t.Errorf("relay all did not stop within a minute of SIGTERM")
	}
}
