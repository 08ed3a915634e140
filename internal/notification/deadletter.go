package notification

import "github.com/relay-demo/relay/retry"

// DeadLetterLimit is how many parked messages a listing shows when it
// names no limit: GET /v1/dead-letters and `relay dead list` alike.
const DeadLetterLimit = 50

// DeadLetter is a parked copy as relay's API and `relay dead` write it in
// JSON: retry's DeadLetter, with the recipient the copy is for
// (HeaderRecipient, which retry reports as its Copy) as "recipient".
type DeadLetter struct {
	retry.DeadLetter
	Recipient string `json:"recipient,omitempty"`
}

// NewDeadLetter returns d with its recipient.
func NewDeadLetter(d retry.DeadLetter) DeadLetter {
	return DeadLetter{DeadLetter: d, Recipient: d.Copy}
}

// DeadLetterDetail is a parked copy in full, as GET /v1/dead-letters/{id}
// answers and `relay dead show --json` prints it: retry's
// DeadLetterDetail, with its recipient as "recipient".
type DeadLetterDetail struct {
	retry.DeadLetterDetail
	Recipient string `json:"recipient,omitempty"`
}

// NewDeadLetterDetail returns d in full, with its recipient.
func NewDeadLetterDetail(d retry.DeadLetter) DeadLetterDetail {
	return DeadLetterDetail{DeadLetterDetail: d.Detail(), Recipient: d.Copy}
}
