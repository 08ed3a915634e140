package send

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/apiclient"
	"github.com/relay-demo/relay/internal/notification"
)

// readmeMarker stands before the README's sample of make demo's output.
const readmeMarker = "<!-- readme-test: demo-output -->"

// TestREADMEDemoOutput: the README's sample of make demo's output is what
// the demo prints. Its first lines must each be one of deploy/demo.sh's
// echo lines; the rest must be exactly what relay send --watch prints, at
// the width of 140 columns the README names, for the three notifications
// of testdata/readme_run.json (the history of a real make demo run, its
// payloads left out).
func TestREADMEDemoOutput(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	sample, ok := readmeSample(string(readme))
	if !ok {
		t.Fatalf("README.md has no code block after %s", readmeMarker)
	}
	script, err := os.ReadFile("../../../deploy/demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	echoes := echoLines(string(script))
	var head []string
	for len(sample) > 0 && !strings.HasPrefix(sample[0], "ntf_") {
		head, sample = append(head, sample[0]), sample[1:]
	}
	if len(head) == 0 {
		t.Errorf("the README's sample starts with no line of demo.sh's")
	}
	for _, l := range head {
		if !matchesAny(echoes, l) {
			t.Errorf("README line %q is none of demo.sh's echo lines", l)
		}
	}

	b, err := os.ReadFile("testdata/readme_run.json")
	if err != nil {
		t.Fatal(err)
	}
	var views []notification.View
	if err := json.Unmarshal(b, &views); err != nil {
		t.Fatal(err)
	}
	srv := historyServer(t, views)
	var out bytes.Buffer
	args := []string{"--api", srv.URL, "--token", "tok", "--n", "3", "--down", "1", "--watch", "--width", "140", "--poll", "1ms", "--timeout", "10s"}
	if err := Run(context.Background(), args, func(k string) string {
		if k == "TZ" {
			return "UTC"
		}
		return ""
	}, &out); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	want := strings.Join(sample, "\n") + "\n"
	if diff := cmp.Diff(out.String(), want); diff != "" {
		t.Errorf("the README's sample after demo.sh's lines is not what relay send --watch prints (-printed +README):\n%s\nprinted:\n%s", diff, out.String())
	}
}

// readmeSample returns the lines of the first code block after the marker.
func readmeSample(readme string) ([]string, bool) {
	_, rest, ok := strings.Cut(readme, readmeMarker)
	if !ok {
		return nil, false
	}
	var lines []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(rest))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```") && !in:
			in = true
		case strings.HasPrefix(l, "```"):
			return lines, true
		case in:
			lines = append(lines, l)
		}
	}
	return nil, false
}

// echoLines are demo.sh's echo lines as patterns: their text, with each
// expansion ($var, ${…}, $(…)) standing for any text.
func echoLines(script string) []*regexp.Regexp {
	var out []*regexp.Regexp
	echo := regexp.MustCompile(`^\s*echo "(.*)"\s*$`)
	expansion := regexp.MustCompile(`\$(\{[^}]*\}|\([^)]*\)|[A-Za-z_][A-Za-z_0-9]*)`)
	for _, l := range strings.Split(script, "\n") {
		m := echo.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		parts := expansion.Split(m[1], -1)
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		out = append(out, regexp.MustCompile("^"+strings.Join(parts, ".*")+"$"))
	}
	return out
}

func matchesAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// historyServer is an API that accepts notifications and answers for
// views[i] as the i-th, its history complete.
func historyServer(t *testing.T, views []notification.View) *httptest.Server {
	var mu sync.Mutex
	next := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/notifications", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if next == len(views) {
			http.Error(w, "no more notifications in the sample", http.StatusBadRequest)
			return
		}
		v := views[next]
		next++
		acc := apiclient.Accepted{ID: v.ID, Channels: v.Channels}
		for _, c := range v.Copies {
			acc.Copies = append(acc.Copies, notification.CopyRef{Channel: c.Channel, Recipient: c.Recipient})
		}
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(acc)
	})
	mux.HandleFunc("GET /v1/notifications/{id}", func(w http.ResponseWriter, r *http.Request) {
		for _, v := range views {
			if v.ID == r.PathValue("id") {
				json.NewEncoder(w).Encode(v)
				return
			}
		}
		http.NotFound(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}
