//go:build faults

package faults_test

import "syscall"

// detached starts a process in a session of its own: signals meant for
// the test process and its group do not reach it, and it outlives it.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// child starts a process that the kernel kills when the test process dies,
// so a relay started by a test never outlives it.
func child() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
