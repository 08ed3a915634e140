package bench

import (
	"context"
	"strings"
	"testing"
)

// TestNoisyRefusesUnknownReceivers stops the figure before any scenario
// for a way of naming the receivers it does not know.
func TestNoisyRefusesUnknownReceivers(t *testing.T) {
	_, err := (&bench{}).Noisy(context.Background(), NoisyOptions{Receivers: []string{"endpoints", "tenant"}})
	if err == nil || !strings.Contains(err.Error(), `receivers "tenant": want one of endpoints, hosts, tenants`) {
		t.Errorf("Noisy with receivers tenant = %v, want an error naming it and the values it takes", err)
	}
}
