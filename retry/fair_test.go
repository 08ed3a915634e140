package retry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// queued is how many calls wait in w.
func (w *window) queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, o := range w.waiting {
		for _, q := range o.flows {
			n += len(q.calls)
		}
	}
	return n
}

// awaitQueued polls until n calls wait in w.
func awaitQueued(t *testing.T, w *window, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for w.queued() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait, want %d", w.queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWindowTakesFlowsInTurn fills a window, lines up three calls of one
// flow and then one of another flow of the same owner, and frees the room
// one message at a time: the other flow's call goes second, not after
// all three.
func TestWindowTakesFlowsInTurn(t *testing.T) {
	w := newWindow(2)
	ctx := context.Background()
	for range 2 {
		if _, err := w.acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	batch, single := NewFlow(ctx, "a"), NewFlow(ctx, "a")
	granted := make(chan string, 4)
	wait := func(ctx context.Context, name string) {
		n, err := w.acquire(ctx, 1)
		if err != nil || n != 1 {
			t.Errorf("%s: acquire = %d, %v", name, n, err)
		}
		granted <- name
	}
	for i, name := range []string{"batch 1", "batch 2", "batch 3"} {
		go wait(batch, name)
		awaitQueued(t, w, i+1)
	}
	go wait(single, "single")
	awaitQueued(t, w, 4)
	var order []string
	for range 4 {
		w.release(1)
		order = append(order, <-granted)
	}
	want := []string{"batch 1", "single", "batch 2", "batch 3"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("granted in order %q, want %q", order, want)
		}
	}
}

// TestWindowCallLargerThanIt lets a call of more messages than the
// window holds go, alone, once the window is empty: it is not stuck.
func TestWindowCallLargerThanIt(t *testing.T) {
	w := newWindow(4)
	ctx := context.Background()
	if _, err := w.acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		n, err := w.acquire(ctx, 10)
		if err != nil {
			t.Error(err)
		}
		done <- n
	}()
	awaitQueued(t, w, 1)
	w.release(1)
	select {
	case n := <-done:
		if n != 4 {
			t.Errorf("a call of 10 holds %d, want the window's 4", n)
		}
		w.release(n)
	case <-time.After(5 * time.Second):
		t.Fatal("a call larger than the window never went")
	}
	if w.free != 4 {
		t.Errorf("free %d after every release, want 4", w.free)
	}
}

// TestWindowGivingUp takes a call that gives up out of the line, so the
// call behind it goes when room frees, and the room a call got is handed
// back whole.
func TestWindowGivingUp(t *testing.T) {
	w := newWindow(2)
	ctx := context.Background()
	if _, err := w.acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	gaveUp, cancel := context.WithCancel(NewFlow(ctx, "a"))
	errs := make(chan error, 1)
	go func() {
		_, err := w.acquire(gaveUp, 2)
		errs <- err
	}()
	awaitQueued(t, w, 1)
	next := make(chan int, 1)
	go func() {
		n, _ := w.acquire(NewFlow(ctx, "b"), 1)
		next <- n
	}()
	awaitQueued(t, w, 2)
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("a call whose context ended: %v, want context.Canceled", err)
	}
	awaitQueued(t, w, 1)
	w.release(1)
	select {
	case n := <-next:
		w.release(n)
	case <-time.After(5 * time.Second):
		t.Fatal("the call behind one that gave up never went")
	}
	w.release(1)
	if w.free != 2 || w.queued() != 0 || len(w.owners) != 0 {
		t.Errorf("free %d, %d queued, %d owners; want 2, 0, 0", w.free, w.queued(), len(w.owners))
	}
}

// TestWindowTakesOwnersInTurn lines up three flows of one owner, two calls
// each, and then one call of another owner: the other owner goes second,
// not after a turn of each of the first owner's flows, and the first
// owner's flows then take their turns.
func TestWindowTakesOwnersInTurn(t *testing.T) {
	w := newWindow(1)
	ctx := context.Background()
	if _, err := w.acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	granted := make(chan string, 8)
	wait := func(ctx context.Context, name string) {
		if _, err := w.acquire(ctx, 1); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		granted <- name
	}
	queued := 0
	for _, f := range []string{"x", "y", "z"} {
		flow := NewFlow(ctx, "many")
		for i := range 2 {
			go wait(flow, fmt.Sprintf("%s%d", f, i+1))
			queued++
			awaitQueued(t, w, queued)
		}
	}
	go wait(NewFlow(ctx, "one"), "other")
	awaitQueued(t, w, queued+1)
	var order []string
	for range queued + 1 {
		w.release(1)
		order = append(order, <-granted)
	}
	want := []string{"x1", "other", "y1", "z1", "x2", "y2", "z2"}
	if !slices.Equal(order, want) {
		t.Fatalf("granted in order %q, want %q", order, want)
	}
}

// TestWindowCallsWithoutAFlow lines up two calls of one owner's flow, then
// two calls whose contexts carry no flow: each of those is an owner of its
// own, so both go before the owner's second call.
func TestWindowCallsWithoutAFlow(t *testing.T) {
	w := newWindow(1)
	ctx := context.Background()
	if _, err := w.acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	granted := make(chan string, 4)
	wait := func(ctx context.Context, name string) {
		if _, err := w.acquire(ctx, 1); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		granted <- name
	}
	flow := NewFlow(ctx, "a")
	for i, c := range []struct {
		ctx  context.Context
		name string
	}{{flow, "a1"}, {flow, "a2"}, {ctx, "p"}, {ctx, "q"}} {
		go wait(c.ctx, c.name)
		awaitQueued(t, w, i+1)
	}
	var order []string
	for range 4 {
		w.release(1)
		order = append(order, <-granted)
	}
	if want := []string{"a1", "p", "q", "a2"}; !slices.Equal(order, want) {
		t.Fatalf("granted in order %q, want %q", order, want)
	}
}
