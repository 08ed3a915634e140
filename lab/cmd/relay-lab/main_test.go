package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		stdout   []string // what stdout must hold
		wantErr  error
		exitCode int
	}{
		{"no command", nil, nil, errUsage, 2},
		{"unknown command", []string{"nope"}, nil, errUsage, 2},
		{"help", []string{"help"}, []string{"workshop", "bench"}, nil, 0},
		{"a command's help", []string{"help", "workshop"}, []string{"compare", "docs"}, nil, 0},
		{"workshop list", []string{"workshop", "list"}, []string{"naive-requeue", "delay-levels"}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, os.Getenv, &stdout, &stderr)
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("run(%q) = %v, want %v", tt.args, err, tt.wantErr)
			}
			var printed bytes.Buffer
			if got := exitCode(err, &printed); got != tt.exitCode {
				t.Fatalf("run(%q): exit code %d, want %d (error %v)", tt.args, got, tt.exitCode, err)
			}
			for _, want := range tt.stdout {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("run(%q) printed no %q:\n%s", tt.args, want, stdout.String())
				}
			}
		})
	}
}

func TestExitCodeNamesTheCommandOnce(t *testing.T) {
	for _, tt := range []struct{ err, want string }{
		{"broker down", "relay-lab: broker down\n"},
		{"relay-lab workshop run needs a strategy", "relay-lab workshop run needs a strategy\n"},
		{"usage: relay-lab workshop <verb> [arguments]", "usage: relay-lab workshop <verb> [arguments]\n"},
	} {
		var out bytes.Buffer
		if code := exitCode(errors.New(tt.err), &out); code != 1 || out.String() != tt.want {
			t.Errorf("exitCode(%q) = %d, printed %q; want 1, %q", tt.err, code, out.String(), tt.want)
		}
	}
}
