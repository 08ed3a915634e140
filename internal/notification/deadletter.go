package notification

import (
	"encoding/json"
	"time"

	"github.com/relay-demo/relay/retry"
)

// DeadLetterLimit is how many parked messages a listing shows when it
// names no limit: GET /v1/dead-letters and `relay dead list` alike.
const DeadLetterLimit = 50

// DeadLetter is a parked copy as relay's API and `relay dead` write it in
// JSON: retry's DeadLetter, with the recipient the copy is for
// (HeaderRecipient, which retry reports as its Copy) as "recipient", and
// its tenant (HeaderTenant) as "tenant", left out for the default
// tenant.
type DeadLetter struct {
	retry.DeadLetter
	Recipient string `json:"recipient,omitempty"`
	Tenant    string `json:"tenant,omitempty"`
}

// NewDeadLetter returns d with its recipient and tenant.
func NewDeadLetter(d retry.DeadLetter) DeadLetter {
	return DeadLetter{DeadLetter: d, Recipient: d.Copy, Tenant: TenantOf(d.Headers)}
}

// DeadLetterDetail is a parked copy in full, as GET /v1/dead-letters/{id}
// answers and `relay dead show --json` prints it: retry's
// DeadLetterDetail, with its recipient as "recipient" and its tenant as
// "tenant" (left out for the default tenant), as a listing shows them.
type DeadLetterDetail struct {
	retry.DeadLetterDetail
	Recipient string `json:"recipient,omitempty"`
	Tenant    string `json:"tenant,omitempty"`
}

// NewDeadLetterDetail returns d in full, with its recipient and tenant.
func NewDeadLetterDetail(d retry.DeadLetter) DeadLetterDetail {
	return DeadLetterDetail{DeadLetterDetail: d.Detail(), Recipient: d.Copy, Tenant: TenantOf(d.Headers)}
}

// TenantOf is the tenant a copy with headers h belongs to: its
// HeaderTenant, as a string or the bytes of one; "" (the default tenant)
// when it has none.
func TenantOf(h map[string]any) string {
	switch v := h[HeaderTenant].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	default:
		return ""
	}
}

// DeadLetterJob is a bulk replay or purge of parked copies run in the
// background, as POST and GET /v1/dead-letters/jobs answer it and `relay
// dead job` prints it.
type DeadLetterJob struct {
	ID string `json:"id"`
	// Tenant is the tenant whose parked copies the job acts on; empty
	// (and left out) for the default tenant's, and for an operator's
	// job over every tenant.
	Tenant string `json:"tenant,omitempty"`
	// Action is "replay" or "purge".
	Action string `json:"action"`
	// State is running, done, failed or cancelled.
	State string `json:"state"`
	// Selection is the selection the job was given, as given.
	Selection json.RawMessage `json:"selection"`
	// Matched counts the parked copies the selection took so far, Done
	// those replayed (or purged), Failed those left parked (a source that
	// is not a work queue, a queue gone).
	Matched    int64      `json:"matched"`
	Done       int64      `json:"done"`
	Failed     int64      `json:"failed"`
	LastError  string     `json:"last_error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Takeovers counts the times another API process took the job over
	// from one that stopped.
	Takeovers int64 `json:"takeovers,omitempty"`
}
