// Command relay runs one of relay's services or tools; `relay help` lists
// them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal asks for a graceful stop; a second ends the process
	// at once, however long the stop takes.
	context.AfterFunc(ctx, stop)
	warnUnknownEnv(os.Args[1:], os.Environ(), os.Stderr)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}
