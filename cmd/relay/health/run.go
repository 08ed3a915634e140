// Package health is `relay health`: a container health check that needs no
// shell and no curl, so it runs in the distroless image. It asks one of a
// relay service's own endpoints (the API's /readyz, a worker's /healthz on
// METRICS_ADDR) and exits 0 on a 2xx answer, 1 otherwise, printing why.
package health

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Run parses the flags and checks the URL the one argument gives.
func Run(ctx context.Context, args []string, _ func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("relay health", flag.ContinueOnError)
	fs.SetOutput(stdout)
	timeout := fs.Duration("timeout", 3*time.Second, "give up on an answer after this long")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: relay health [--timeout D] URL\n\nexits 0 when URL answers 2xx, e.g. relay health http://127.0.0.1:8080/readyz")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("relay health takes one URL, such as http://127.0.0.1:8080/readyz")
	}
	if *timeout <= 0 {
		return fmt.Errorf("--timeout %s: want more than 0", *timeout)
	}
	target := fs.Arg(0)
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: want an http:// or https:// URL", target)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("unhealthy: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("unhealthy: %s answered %s: %s", target, resp.Status, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(stdout, "healthy: %s answered %s\n", target, resp.Status)
	return nil
}
