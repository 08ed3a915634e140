// Package send is `relay send`: a small client that posts notifications to
// the API and, with --watch, follows each one in the API's history until
// every copy is delivered or parked, printing each attempt once its
// outcome is known.
package send

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/relay-demo/relay/demo/flaky"
	"github.com/relay-demo/relay/internal/apiclient"
)

// Run parses the flags and sends.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	// --watch prints downstreams' error texts: nothing of them reaches the
	// terminal as a control sequence.
	stdout = apiclient.Terminal(stdout)
	fs := flag.NewFlagSet("relay send", flag.ContinueOnError)
	fs.SetOutput(stdout)
	var api apiclient.Flags
	api.Register(fs, getenv("RELAY_API"), apiclient.Token(getenv, os.Stderr))
	n := fs.Int("n", 10, "how many notifications to send")
	channels := fs.String("channels", "email,webhook", "channels each notification uses: email, webhook or both")
	to := fs.String("to", "ada@example.com", "email recipient")
	hook := fs.String("webhook-url", or(getenv("DEMO_WEBHOOK_URL"), "http://localhost:9090/webhooks/demo"), "webhook target `url`")
	down := fs.Int("down", 0, "send the last `N` notifications' webhooks to the flaky receiver's endpoint that is always down ("+flaky.PathDown+" beside --webhook-url), to watch one retry through the whole schedule and be parked")
	key := fs.String("idempotency-prefix", "", "send Idempotency-Key <prefix>-<n>, so a rerun yields the same ids")
	watch := fs.Bool("watch", false, "follow each notification's attempts in the API's history until it is delivered or parked")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up watching after this long")
	interval := fs.Duration("interval", 0, "pause between two posts (0: post them all at once)")
	poll := fs.Duration("poll", 250*time.Millisecond, "while watching, pause between two requests to the history, whatever the number of notifications")
	width := fs.Int("width", 100, "while watching, cut each error at a word boundary to fit lines of this many `columns`")
	full := fs.Bool("full", false, "while watching, print every error in full")
	at := fs.String("at", "", "schedule each notification for this RFC 3339 `time`, such as 2026-12-01T09:30:00Z (send_at)")
	in := fs.Duration("in", 0, "schedule each notification this long from now, such as 90s (delay)")
	patience := fs.Duration("wait", 2*time.Minute, "when the API answers 503 (not ready, broker away) or 429 (rate limited), wait as its Retry-After says (1s without one) and post again, for up to this long per notification (0: give up at once)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected %q: relay send takes flags only", strings.Join(fs.Args(), " "))
	}
	if *n < 1 || *n > 1000000 {
		return fmt.Errorf("--n %d: want 1 to 1000000", *n)
	}
	if *interval < 0 {
		return fmt.Errorf("--interval %s: want 0 or more", *interval)
	}
	if *patience < 0 {
		return fmt.Errorf("--wait %s: want 0 or more", *patience)
	}
	if *poll < time.Millisecond {
		return fmt.Errorf("--poll %s: want 1ms or more", *poll)
	}
	if *width < 40 {
		return fmt.Errorf("--width %d: want 40 columns or more", *width)
	}
	body, err := notificationBody(*channels, *to, *hook)
	if err != nil {
		return err
	}
	switch {
	case *at != "" && *in != 0:
		return errors.New("--at and --in: give one, not both")
	case *at != "":
		if _, err := time.Parse(time.RFC3339Nano, *at); err != nil {
			return fmt.Errorf("--at %q: want an RFC 3339 time such as 2026-12-01T09:30:00Z", *at)
		}
		body["send_at"] = *at
	case *in < 0:
		return fmt.Errorf("--in %s: want a positive duration", *in)
	case *in > 0:
		body["delay"] = in.String()
	}
	var downBody map[string]any
	switch {
	case *down < 0 || *down > *n:
		return fmt.Errorf("--down %d: want 0 to --n (%d)", *down, *n)
	case *down > 0 && body["webhook"] == nil:
		return fmt.Errorf("--down %d: the down endpoint takes webhooks; add webhook to --channels", *down)
	case *down > 0:
		u, err := url.Parse(*hook)
		if err != nil {
			return fmt.Errorf("--webhook-url %q: %w", *hook, err)
		}
		u.Path, u.RawQuery = flaky.PathDown, ""
		if downBody, err = notificationBody(*channels, *to, u.String()); err != nil {
			return err
		}
		for _, k := range []string{"send_at", "delay"} {
			if v, ok := body[k]; ok {
				downBody[k] = v
			}
		}
	}
	client := api.Client()

	var sent []apiclient.Accepted
	for i := range *n {
		body := body
		if i >= *n-*down {
			body = downBody
		}
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
		res, err := post(ctx, client, body, k, *patience, stdout)
		if err != nil {
			return fmt.Errorf("notification %d of %d: %w", i+1, *n, api.Explain(err))
		}
		sent = append(sent, res)
		switch {
		case res.DueAt != nil && res.Rounded != "":
			fmt.Fprintf(stdout, "%s\t%s\tdue %s (%s)\n", res.ID, strings.Join(res.Channels, ","), res.DueAt.Local().Format(time.RFC3339Nano), res.Rounded)
		case res.DueAt != nil:
			fmt.Fprintf(stdout, "%s\t%s\tdue %s\n", res.ID, strings.Join(res.Channels, ","), res.DueAt.Local().Format(time.RFC3339Nano))
		default:
			fmt.Fprintf(stdout, "%s\t%s\n", res.ID, strings.Join(res.Channels, ","))
		}
	}
	if !*watch {
		return nil
	}
	// The times are the local time's, as TZ names it in the environment
	// Run was given (the process's own, from main).
	loc := time.Local
	if tz := getenv("TZ"); tz != "" {
		if l, err := time.LoadLocation(tz); err == nil {
			loc = l
		}
	}
	w := &watcher{history: client, out: stdout, width: *width, full: *full, poll: *poll,
		grace: 3 * time.Second, loc: loc, now: time.Now}
	return api.Explain(w.follow(ctx, sent, *timeout))
}

// post posts one notification. An answer that says "not now" (503, 429)
// means the API did not take it, so posting it again cannot make a
// duplicate: post waits as the answer asks and tries again, for up to
// patience in all. Any other error ends it at once.
func post(ctx context.Context, client *apiclient.Client, body any, key string, patience time.Duration, stdout io.Writer) (apiclient.Accepted, error) {
	deadline := time.Now().Add(patience)
	for {
		res, err := client.Post(ctx, body, key)
		var aerr *apiclient.Error
		if err == nil || !errors.As(err, &aerr) || (aerr.Status != http.StatusServiceUnavailable && aerr.Status != http.StatusTooManyRequests) {
			return res, err
		}
		wait := aerr.RetryAfter
		if wait <= 0 {
			wait = time.Second
		}
		if time.Now().Add(wait).After(deadline) {
			return res, fmt.Errorf("still refused after waiting up to --wait %s: %w", patience, err)
		}
		fmt.Fprintf(stdout, "waiting %s: %v\n", wait, err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, ctx.Err()
		case <-t.C:
		}
	}
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
