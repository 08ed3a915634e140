package api

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/relay-demo/relay/internal/notification"
	"github.com/relay-demo/relay/retry"
)

// checkType checks a notification's type against the types the topology
// has schedules for (NOTIFICATION_TYPES): nil for no type or a known one,
// else a 422 naming the field and the types there are.
func checkType(t retry.Topology, n *notification.Notification) *Problem {
	if n.Type == "" {
		return nil
	}
	if _, ok := t.Types[n.Type]; ok {
		return nil
	}
	msg := fmt.Sprintf("unknown type %q: no types are configured (NOTIFICATION_TYPES); leave type out for the default schedule", n.Type)
	if len(t.Types) > 0 {
		msg = fmt.Sprintf("unknown type %q: want one of %s, or leave type out for the default schedule",
			n.Type, strings.Join(slices.Sorted(maps.Keys(t.Types)), ", "))
	}
	return invalidFields(notification.Invalid{{Field: "type", Message: msg}})
}
