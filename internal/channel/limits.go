package channel

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/relay-demo/relay/internal/config"
)

// ratePrefixes are the variable prefixes whose *_RATE settings limit a
// channel's sends across every worker replica; TENANT_DELIVERY_RATE
// limits every channel's.
var ratePrefixes = map[string]string{"email": "SMTP", "sms": "SMS", "webhook": "WEBHOOK_ENDPOINT"}

// LimitNotice says, for the worker of channel name, when its rate limits
// are shared through a store other replicas may not share: the limits
// count in the history store, and an SQLite file (the default, in
// DATA_DIR) is shared only by the processes that open that very file, so
// three replicas on three machines would each send at the full rate. It
// is empty when no limit is set or the store is PostgreSQL.
func LimitNotice(name string, getenv func(string) string) string {
	if strings.HasPrefix(getenv("HISTORY_DSN"), "postgres") {
		return ""
	}
	var vars []string
	if prefix, ok := ratePrefixes[name]; ok {
		vars = append(vars, prefix+"_RATE")
		if n, err := strconv.Atoi(getenv(prefix + "_PROVIDERS")); err == nil {
			for i := 1; i <= min(n, 64); i++ {
				vars = append(vars, fmt.Sprintf("%s_%d_RATE", prefix, i))
			}
		}
	}
	// Every channel's worker holds each tenant to TENANT_DELIVERY_RATE.
	vars = append(vars, "TENANT_DELIVERY_RATE")
	var set []string
	for _, v := range vars {
		if r, err := strconv.ParseFloat(getenv(v), 64); err == nil && r > 0 {
			set = append(set, v)
		}
	}
	if len(set) == 0 {
		return ""
	}
	var store config.Store
	_ = config.Parse(getenv, &store) // strings alone: it cannot fail
	return fmt.Sprintf("%s counted in the SQLite store %s: only the replicas that open that very file share the limit, "+
		"and each replica with a store of its own sends at the full rate; set HISTORY_DSN to a PostgreSQL database every replica shares",
		strings.Join(set, ", "), store.DSN())
}
