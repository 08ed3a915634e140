// Package send is `relay send`: a small client that posts notifications to
// the API and, with --watch, follows each one's attempts on the API's event
// stream until it is delivered or parked.
package send

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Run parses the flags and sends.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("relay send", flag.ContinueOnError)
	fs.SetOutput(stdout)
	api := fs.String("api", or(getenv("RELAY_API"), "http://localhost:8080"), "API base `url` (env RELAY_API)")
	token := fs.String("token", getenv("API_TOKEN"), "bearer `token` (env API_TOKEN)")
	n := fs.Int("n", 10, "how many notifications to send")
	channels := fs.String("channels", "email,webhook", "channels each notification uses: email, webhook or both")
	to := fs.String("to", "ada@example.com", "email recipient")
	hook := fs.String("webhook-url", or(getenv("DEMO_WEBHOOK_URL"), "http://localhost:9090/webhooks/demo"), "webhook target `url`")
	key := fs.String("idempotency-prefix", "", "send Idempotency-Key <prefix>-<n>, so a rerun yields the same ids")
	watch := fs.Bool("watch", false, "follow each notification's attempts until it is delivered or parked")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up watching after this long")
	interval := fs.Duration("interval", 0, "pause between two posts (0: post them all at once)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *n > 1000000 {
		return fmt.Errorf("--n %d: want 1 to 1000000", *n)
	}
	if *interval < 0 {
		return fmt.Errorf("--interval %s: want 0 or more", *interval)
	}
	body, err := notificationBody(*channels, *to, *hook)
	if err != nil {
		return err
	}
	c := &client{base: strings.TrimRight(*api, "/"), token: *token, http: &http.Client{Timeout: 30 * time.Second}}

	// Subscribe before sending, so no attempt is missed.
	var stream *eventStream
	if *watch {
		if stream, err = c.events(ctx); err != nil {
			return err
		}
		defer stream.Close()
	}
	pending := map[string]int{} // id → copies not yet finished
	for i := range *n {
		if i > 0 && *interval > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(*interval):
			}
		}
		k := ""
		if *key != "" {
			k = fmt.Sprintf("%s-%d", *key, i)
		}
		res, err := c.post(ctx, body, k)
		if err != nil {
			return fmt.Errorf("notification %d of %d: %w", i+1, *n, err)
		}
		pending[res.ID] = len(res.Channels)
		fmt.Fprintf(stdout, "%s\t%s\n", res.ID, strings.Join(res.Channels, ","))
	}
	if !*watch {
		return nil
	}
	return follow(ctx, stream, pending, *timeout, stdout)
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func notificationBody(channels, to, hook string) (map[string]any, error) {
	body := map[string]any{}
	for _, ch := range strings.Split(channels, ",") {
		switch strings.TrimSpace(ch) {
		case "email":
			body["email"] = map[string]any{"to": []string{to}, "subject": "Hello from relay",
				"text": "This message came through relay's retry pipeline.",
				"html": "<p>This message came through <b>relay</b>'s retry pipeline.</p>"}
		case "webhook":
			body["webhook"] = map[string]any{"url": hook, "payload": map[string]any{"event": "demo", "sent_at": time.Now().UTC()}}
		default:
			return nil, fmt.Errorf("--channels %q: want email, webhook or email,webhook", channels)
		}
	}
	return body, nil
}

type client struct {
	base, token string
	http        *http.Client
}

type accepted struct {
	ID       string   `json:"id"`
	Channels []string `json:"channels"`
}

func (c *client) post(ctx context.Context, body map[string]any, key string) (accepted, error) {
	var res accepted
	b, err := json.Marshal(body)
	if err != nil {
		return res, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/notifications", bytes.NewReader(b))
	if err != nil {
		return res, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return res, fmt.Errorf("post to %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusAccepted {
		return res, fmt.Errorf("API answered %s: %s", resp.Status, strings.TrimSpace(string(raw)))
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return res, fmt.Errorf("decode API answer %q: %w", raw, err)
	}
	return res, nil
}

// event is the part of an attempt event the client prints.
type event struct {
	Outcome string    `json:"outcome"`
	ID      string    `json:"id"`
	Channel string    `json:"channel"`
	Attempt int       `json:"attempt"`
	DelayMS int64     `json:"delay_ms"`
	Error   string    `json:"error"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

type eventStream struct {
	body   io.ReadCloser
	events chan event
	err    error
}

func (s *eventStream) Close() error { return s.body.Close() }

// events opens the API's server-sent event stream.
func (c *client) events(ctx context.Context) (*eventStream, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/dashboard/events?live=1", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("open event stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("open event stream: %s", resp.Status)
	}
	s := &eventStream{body: resp.Body, events: make(chan event, 256)}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var e event
			if json.Unmarshal([]byte(data), &e) == nil {
				s.events <- e
			}
		}
		s.err = sc.Err()
	}()
	return s, nil
}

// follow prints each attempt of the notifications in pending until every
// copy is delivered or parked.
func follow(ctx context.Context, s *eventStream, pending map[string]int, timeout time.Duration, w io.Writer) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	delivered, parked := 0, 0
	for left := len(pending); left > 0; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%d notification(s) still in flight after %s", left, timeout)
		case e, ok := <-s.events:
			if !ok {
				return errors.Join(errors.New("event stream ended"), s.err)
			}
			if _, mine := pending[e.ID]; !mine {
				continue
			}
			if len(e.Error) > 80 {
				e.Error = e.Error[:79] + "…"
			}
			line := fmt.Sprintf("%s  %-26s %-8s attempt %d  %-9s", e.At.Format("15:04:05.000"), e.ID, e.Channel, e.Attempt, e.Outcome)
			switch e.Outcome {
			case "failed":
				line += " " + e.Error
			case "retrying":
				line += fmt.Sprintf(" next in %s", time.Duration(e.DelayMS)*time.Millisecond)
			case "parked":
				line += " reason " + e.Reason + "  " + e.Error
			}
			fmt.Fprintln(w, strings.TrimRight(line, " "))
			if e.Outcome == "delivered" || e.Outcome == "parked" {
				if e.Outcome == "delivered" {
					delivered++
				} else {
					parked++
				}
				if pending[e.ID]--; pending[e.ID] == 0 {
					left--
				}
			}
		}
	}
	fmt.Fprintf(w, "done: %d copies delivered, %d parked\n", delivered, parked)
	return nil
}
