package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-demo/relay/retry"
)

const (
	retriesDoc = "../../docs/retries.md"
	ciCells    = "../../.ci/cells"
)

// TestBackendsDoc checks that the tables of delay backends in
// docs/retries.md are what the backends declare (retry.Features) and what
// CI runs (.ci/cells); -update (make docs) rewrites them.
func TestBackendsDoc(t *testing.T) {
	raw, err := os.ReadFile(retriesDoc)
	if err != nil {
		t.Fatal(err)
	}
	cells, err := readCells(ciCells)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for id, table := range map[string]string{"backends": promisesTable(), "cells": cellsTable(cells)} {
		doc, err = replaceBlock(doc, id, table)
		if err != nil {
			t.Fatal(err)
		}
	}
	updateOrDiff(t, retriesDoc, string(raw), doc, "docs/retries.md's tables of delay backends differ from the code and .ci/cells")
}

// cell is a line of .ci/cells: a RabbitMQ version, the make target that
// runs the conformance suite on it, and the backends that must run there.
type cell struct {
	version, target string
	backends        []retry.Backend
}

func readCells(path string) ([]cell, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cell
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		w := strings.Fields(line)
		if len(w) < 3 {
			return nil, fmt.Errorf("%s:%d: want a version, a make target and backends", path, n)
		}
		c := cell{version: w[0], target: w[1]}
		for _, b := range w[2:] {
			f, err := retry.FeaturesOf(retry.Backend(b))
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, n, err)
			}
			if !f.RunsOn(c.version) {
				return nil, fmt.Errorf("%s:%d: the %s backend does not run on RabbitMQ %s", path, n, b, c.version)
			}
			c.backends = append(c.backends, retry.Backend(b))
		}
		out = append(out, c)
	}
	return out, sc.Err()
}

func yes(ok bool, y, n string) string {
	if ok {
		return y
	}
	return n
}

// promisesTable is what each backend promises.
func promisesTable() string {
	var b strings.Builder
	b.WriteString("| `DELAY_BACKEND` | how a message waits | every wait exact | late by at most¹ | `Retry-After`, rate-limit slots² | jitter | scheduled sends | schedules | a schedule per type | replicated on a cluster |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, bk := range retry.Backends() {
		f, _ := retry.FeaturesOf(bk)
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", bk, f.How,
			yes(f.ExactDelays, "yes", "rounded up to a step"), f.Tolerance.Round(time.Millisecond),
			yes(f.Deferrals, "exact, no retry spent", "no"), yes(f.Jitter, "yes", "no (refused at start)"),
			yes(f.FirstDelivery, "yes", "no"), yes(f.AnySchedule, "any", "linear only: min(first × attempt, last)"),
			yes(f.Types, "yes", "no (refused at start)"), yes(f.Cluster, "yes", "no: one node holds the waiting messages"))
	}
	return b.String()
}

// cellsTable is where each backend runs, and where CI runs its
// conformance suite.
func cellsTable(cells []cell) string {
	var b strings.Builder
	b.WriteString("| `DELAY_BACKEND` | queue types | hand-offs | RabbitMQ | needs | conformance suite in CI |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, bk := range retry.Backends() {
		f, _ := retry.FeaturesOf(bk)
		var qs, hs []string
		for _, q := range f.QueueTypes {
			qs = append(qs, string(q))
		}
		for _, h := range f.Handoffs {
			hs = append(hs, yes(h == retry.ViaStages, "stages", string(h)))
		}
		var ran []string
		for _, c := range cells {
			if slices.Contains(c.backends, bk) {
				ran = append(ran, fmt.Sprintf("%s (`make %s`)", c.version, c.target))
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", bk, strings.Join(qs, ", "), strings.Join(hs, ", "), f.Versions(),
			yes(f.Needs != "", f.Needs, "nothing"), yes(len(ran) > 0, strings.Join(ran, ", "), "none"))
	}
	return b.String()
}

// replaceBlock replaces the text between <!-- id --> and <!-- /id -->.
func replaceBlock(doc, id, table string) (string, error) {
	open, end := "<!-- "+id+" -->\n", "<!-- /"+id+" -->"
	i := strings.Index(doc, open)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("docs/retries.md lacks the markers %q and %q", strings.TrimSpace(open), end)
	}
	return doc[:i+len(open)] + table + doc[j:], nil
}
