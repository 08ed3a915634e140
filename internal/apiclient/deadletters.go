package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/relay-demo/relay/internal/notification"
)

// Selection names parked messages for a replay, a purge or a job, as the
// bodies of POST /v1/dead-letters/replay, /purge and /jobs do: an id, a
// source queue, a recipient, a channel, a park reason, a webhook endpoint,
// a parked-at range (RFC 3339), an error text, a tenant, or all of them.
type Selection struct {
	ID        string `json:"id,omitempty"`
	Source    string `json:"source,omitempty"`
	Recipient string `json:"recipient,omitempty"`
	Channel   string `json:"channel,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Endpoint  string `json:"endpoint,omitempty"`
	Since     string `json:"since,omitempty"`
	Until     string `json:"until,omitempty"`
	Error     string `json:"error,omitempty"`
	// Tenant selects one tenant's parked copies ("default" the default
	// tenant's): an operator's token's choice; a tenant's token acts on
	// its own tenant's whatever it names.
	Tenant string `json:"tenant,omitempty"`
	All    bool   `json:"all,omitempty"`
}

// Query is s as the query of GET /v1/dead-letters (which takes no all).
func (s Selection) Query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"id": s.ID, "source": s.Source, "recipient": s.Recipient, "channel": s.Channel,
		"reason": s.Reason, "endpoint": s.Endpoint, "since": s.Since, "until": s.Until, "error": s.Error, "tenant": s.Tenant} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// DeadLetters lists parked messages (GET /v1/dead-letters), selected by
// the query's id, source, recipient and limit.
func (c *Client) DeadLetters(ctx context.Context, q url.Values) ([]notification.DeadLetter, error) {
	raw, err := c.do(ctx, http.MethodGet, "/v1/dead-letters"+query(q), nil, nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var answer struct {
		DeadLetters []notification.DeadLetter `json:"dead_letters"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, fmt.Errorf("read the API's dead letters: %w", err)
	}
	return answer.DeadLetters, nil
}

// DeadLetter reads every parked copy of the message id in full (GET
// /v1/dead-letters/{id}), narrowed by the query's source and recipient. An
// id nothing matches is an *Error that is ErrNotFound.
func (c *Client) DeadLetter(ctx context.Context, id string, q url.Values) ([]notification.DeadLetterDetail, error) {
	raw, err := c.do(ctx, http.MethodGet, "/v1/dead-letters/"+url.PathEscape(id)+query(q), nil, nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var answer struct {
		DeadLetters []notification.DeadLetterDetail `json:"dead_letters"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, fmt.Errorf("read the API's dead letter %s: %w", id, err)
	}
	return answer.DeadLetters, nil
}

// ReplayDeadLetters sends the selected parked messages back to their
// source queues (POST /v1/dead-letters/replay) and returns how many went.
// A replay refused part way (409: a message names a queue that is not
// relay's) returns how many went before, with the error.
func (c *Client) ReplayDeadLetters(ctx context.Context, s Selection) (int, error) {
	return c.selected(ctx, "/v1/dead-letters/replay", s, "replayed")
}

// PurgeDeadLetters deletes the selected parked messages for good (POST
// /v1/dead-letters/purge, confirmed) and returns how many.
func (c *Client) PurgeDeadLetters(ctx context.Context, s Selection) (int, error) {
	body := struct {
		Selection
		Confirm bool `json:"confirm"`
	}{s, true}
	return c.selected(ctx, "/v1/dead-letters/purge", body, "purged")
}

// CountDeadLetters is a dry run of action ("replay" or "purge"): how many
// parked messages s selects now, with nothing touched.
func (c *Client) CountDeadLetters(ctx context.Context, action string, s Selection) (int, error) {
	body := struct {
		Selection
		DryRun bool `json:"dry_run"`
	}{s, true}
	return c.selected(ctx, "/v1/dead-letters/"+action, body, "matched")
}

// StartDeadLetterJob starts a job that replays or purges (action) the
// selected parked messages in the background (POST
// /v1/dead-letters/jobs); a purge is sent confirmed.
func (c *Client) StartDeadLetterJob(ctx context.Context, action string, s Selection) (notification.DeadLetterJob, error) {
	b, err := json.Marshal(struct {
		Action string `json:"action"`
		Selection
		Confirm bool `json:"confirm,omitempty"`
	}{action, s, action == "purge"})
	if err != nil {
		return notification.DeadLetterJob{}, err
	}
	raw, err := c.do(ctx, http.MethodPost, "/v1/dead-letters/jobs", http.Header{"Content-Type": {"application/json"}}, b, http.StatusAccepted)
	if err != nil {
		return notification.DeadLetterJob{}, err
	}
	return readJob(raw)
}

// DeadLetterJob reads the job id (GET /v1/dead-letters/jobs/{id}); an
// unknown id is an *Error that is ErrNotFound.
func (c *Client) DeadLetterJob(ctx context.Context, id string) (notification.DeadLetterJob, error) {
	raw, err := c.do(ctx, http.MethodGet, "/v1/dead-letters/jobs/"+url.PathEscape(id), nil, nil, http.StatusOK)
	if err != nil {
		return notification.DeadLetterJob{}, err
	}
	return readJob(raw)
}

// CancelDeadLetterJob cancels the running job id (DELETE
// /v1/dead-letters/jobs/{id}) and returns it; a job that had ended is an
// *Error with status 409.
func (c *Client) CancelDeadLetterJob(ctx context.Context, id string) (notification.DeadLetterJob, error) {
	raw, err := c.do(ctx, http.MethodDelete, "/v1/dead-letters/jobs/"+url.PathEscape(id), nil, nil, http.StatusOK)
	if err != nil {
		return notification.DeadLetterJob{}, err
	}
	return readJob(raw)
}

func readJob(raw []byte) (notification.DeadLetterJob, error) {
	var j notification.DeadLetterJob
	if err := json.Unmarshal(raw, &j); err != nil {
		return j, fmt.Errorf("read the API's dead-letter job: %w", err)
	}
	return j, nil
}

// selected posts a selection to path and reads the count the answer names
// under key, from a success or from a problem that says how many went
// before it.
func (c *Client) selected(ctx context.Context, path string, body any, key string) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	h := http.Header{"Content-Type": {"application/json"}}
	raw, err := c.do(ctx, http.MethodPost, path, h, b, http.StatusOK)
	var e *Error
	if errors.As(err, &e) {
		raw = e.Body
	} else if err != nil {
		return 0, err
	}
	var answer map[string]json.RawMessage
	var n int
	if json.Unmarshal(raw, &answer) == nil {
		_ = json.Unmarshal(answer[key], &n)
	}
	return n, err
}

// query is q as a URL's query, "" when it is empty.
func query(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}
