package dead

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/relay-demo/relay/internal/apiclient"
	"github.com/relay-demo/relay/internal/notification"
)

// jobAPI is the job routes of an API whose job advances one step a poll,
// through the states steps lists.
type jobAPI struct {
	mu     sync.Mutex
	steps  []notification.DeadLetterJob
	polls  int
	posted map[string]any
}

func (a *jobAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var j notification.DeadLetterJob
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/dead-letters/jobs":
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &a.posted)
		j = a.steps[0]
		w.Header().Set("Location", "/v1/dead-letters/jobs/"+j.ID)
		w.WriteHeader(http.StatusAccepted)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/dead-letters/jobs/job_1":
		a.polls++
		j = a.steps[min(a.polls, len(a.steps)-1)]
	default:
		http.NotFound(w, r)
		return
	}
	_ = json.NewEncoder(w).Encode(j)
}

func TestRunJob(t *testing.T) {
	step := func(state string, matched, done, failed int64, lastError string) notification.DeadLetterJob {
		return notification.DeadLetterJob{ID: "job_1", Action: "replay", State: state, Matched: matched, Done: done, Failed: failed,
			LastError: lastError, Selection: json.RawMessage(`{}`), StartedAt: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)}
	}
	tests := []struct {
		name       string
		steps      []notification.DeadLetterJob
		total      int
		wantErr    string
		wantOut    string
		wantStderr string
	}{
		{name: "progress then done", total: 300,
			steps:   []notification.DeadLetterJob{step("running", 0, 0, 0, ""), step("running", 120, 100, 0, ""), step("running", 120, 100, 0, ""), step("done", 300, 300, 0, "")},
			wantOut: "job job_1 done: replayed 300 of 300 matched message(s), 0 left parked\n",
			wantStderr: "started job job_1 (relay dead job job_1 shows it)\n" +
				"job job_1: 0 of about 300 (0%) replayed, 0 matched, 0 failed\njob job_1: 100 of about 300 (33%) replayed, 120 matched, 0 failed\n"},
		{name: "failed, not counted before", total: -1, steps: []notification.DeadLetterJob{step("running", 0, 0, 0, ""), step("failed", 10, 4, 0, "broker gone")},
			wantOut: "job job_1 failed: replayed 4 of 10 matched message(s), 0 left parked\n", wantErr: "job job_1 failed: broker gone",
			wantStderr: "started job job_1 (relay dead job job_1 shows it)\njob job_1: 0 replayed, 0 matched, 0 failed\n"},
		{name: "some left parked", total: 5, steps: []notification.DeadLetterJob{step("done", 5, 3, 2, "not one of the topology's work queues")},
			wantOut: "job job_1 done: replayed 3 of 5 matched message(s), 2 left parked\n", wantErr: "left 2 message(s) parked",
			wantStderr: "started job job_1 (relay dead job job_1 shows it)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &jobAPI{steps: tt.steps}
			srv := httptest.NewServer(api)
			defer srv.Close()
			var out, errOut bytes.Buffer
			o := options{verb: "replay", channel: "email", reason: "permanent", job: true}
			err := runJob(t.Context(), apiclient.New(srv.URL, "", nil), o, tt.total, &out, &errOut, time.Millisecond)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("runJob = %v, want %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantOut, out.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantStderr, errOut.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]any{"action": "replay", "channel": "email", "reason": "permanent"}, api.posted); diff != "" {
				t.Errorf("posted (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrintJob(t *testing.T) {
	end := time.Date(2026, 3, 14, 9, 5, 0, 0, time.UTC)
	j := notification.DeadLetterJob{ID: "job_1", Action: "purge", State: "done", Selection: json.RawMessage(`{"reason":"expired"}`),
		Matched: 7, Done: 7, StartedAt: end.Add(-5 * time.Minute), FinishedAt: &end, Takeovers: 1}
	var out bytes.Buffer
	if err := printJob(&out, j, false); err != nil {
		t.Fatal(err)
	}
	want := "id          job_1\naction      purge\nstate       done\nselection   {\"reason\":\"expired\"}\nmatched     7\ndone        7\nfailed      0\n" +
		"started     2026-03-14 09:00:00\nfinished    2026-03-14 09:05:00\ntakeovers   1\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("printJob (-want +got):\n%s", diff)
	}
}
