package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestDispatch(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr error
		want    string
	}{
		{nil, errUsage, ""},
		{[]string{"help"}, nil, "dead replay"},
		{[]string{"help"}, nil, "status"},
		{[]string{"status", "-h"}, flag.ErrHelp, ""},
		{[]string{"nope"}, errUsage, "unknown command"},
		{[]string{"dead"}, errUsage, "list, replay, purge"},
		{[]string{"retrier", "extra"}, errUsage, "configured by environment"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tt.args, func(string) string { return "" }, &out, &errOut)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("run = %v, want %v", err, tt.wantErr)
			}
			got := out.String()
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("output %q lacks %q", got, tt.want)
			}
		})
	}
}
