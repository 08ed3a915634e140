package store

import (
	"context"
	"fmt"
	"sync"
)

// Lazy is a process's one store, opened on first use and then shared by
// every user: a worker starts, and sends notifications not scheduled,
// while the store is down, and a store that failed to open is tried again
// at its next use.
type Lazy struct {
	open func(ctx context.Context) (*Store, error)

	mu    sync.Mutex
	store *Store
}

// NewLazy returns a Lazy that opens its store with open.
func NewLazy(open func(ctx context.Context) (*Store, error)) *Lazy {
	return &Lazy{open: open}
}

// Open returns the store, opening it if it is not yet.
func (l *Lazy) Open(ctx context.Context) (*Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store == nil {
		s, err := l.open(ctx)
		if err != nil {
			return nil, fmt.Errorf("open the history store: %w", err)
		}
		l.store = s
	}
	return l.store, nil
}

// Close closes the store, if it was opened.
func (l *Lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store == nil {
		return nil
	}
	err := l.store.Close()
	l.store = nil
	return err
}
