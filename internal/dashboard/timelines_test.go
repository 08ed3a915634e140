package dashboard

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/relay-demo/relay/internal/notification"
)

// TestTimelines gives the list each copy's attempts, times and outcomes
// only, for the ids it asks about.
func TestTimelines(t *testing.T) {
	h := New(Deps{History: &fakeHistory{notifications: []*notification.View{parkedNotification(), splitNotification()}},
		Authenticate: authenticate, Public: true})
	for _, auth := range []string{"", "Bearer " + goodToken} {
		resp, body := get(t, h, "/dashboard/timelines?id=ntf_1&id=ntf_unknown&id=ntf_1", auth)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		if strings.Contains(body, "s3cret") {
			t.Errorf("timelines show an error text or a payload: %s", body)
		}
		var got struct {
			Timelines map[string][]timelineView `json:"timelines"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		want := map[string][]timelineView{"ntf_1": {
			{Channel: "email", Status: "delivered", Attempts: []timelineMark{{N: 1, At: t0.Add(time.Second), Outcome: "delivered"}}},
			{Channel: "webhook", Status: "parked", Attempts: []timelineMark{
				{N: 1, At: t0.Add(time.Second), Outcome: "failed", DelayMS: ms(100)},
				{N: 2, At: t0.Add(3 * time.Second), Outcome: "parked", Reason: "max-retries"},
			}},
		}}
		if diff := cmp.Diff(want, got.Timelines); diff != "" {
			t.Errorf("timelines (-want +got):\n%s", diff)
		}
	}
	many := "/dashboard/timelines?id=" + strings.Repeat("ntf_1&id=", maxTimelines) + "ntf_1"
	for _, path := range []string{"/dashboard/timelines", "/dashboard/timelines?id=ntf_1&q=x", many} {
		if resp, body := get(t, h, path, "Bearer "+goodToken); resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("GET %s: %d %s, want 422", path, resp.StatusCode, body)
		}
	}
	private := New(Deps{History: &fakeHistory{}, Authenticate: authenticate})
	if resp, _ := get(t, private, "/dashboard/timelines?id=ntf_1", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("private dashboard without a token: %d, want 401", resp.StatusCode)
	}
}
