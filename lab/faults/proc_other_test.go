//go:build faults && !linux

package faults_test

import "syscall"

// detached has nothing to add where sessions are not set up this way.
func detached() *syscall.SysProcAttr { return nil }

// child has nothing to add where the kernel cannot kill a child with its
// parent: the test's cleanup kills it.
func child() *syscall.SysProcAttr { return nil }
