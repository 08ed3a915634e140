package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestUnknownCommandOutput checks what relay prints for a command it does
// not have: one line with the command it likely meant, not the whole
// help, and exit code 2.
func TestUnknownCommandOutput(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"stauts"}, "relay: unknown command \"stauts\": did you mean relay status? (`relay help` lists the commands)\n"},
		{[]string{"frobnicate"}, "relay: unknown command \"frobnicate\" (`relay help` lists the commands)\n"},
		{[]string{"wroker", "email"}, "relay: unknown command \"wroker\": did you mean relay worker? (`relay help` lists the commands)\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, func(string) string { return "" }, &stdout, &stderr)
			if code := exitCode(err, &stderr); code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if stderr.String() != tt.want || stdout.Len() > 0 {
				t.Errorf("stderr %q, stdout %q; want stderr %q and no stdout", stderr.String(), stdout.String(), tt.want)
			}
		})
	}
}
