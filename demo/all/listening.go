package all

import (
	"encoding/json"
	"strings"
)

// Addrs is where a running relay all listens.
type Addrs struct {
	// API is the API's address (HTTP_ADDR); FlakyHTTP and FlakySMTP are
	// the flaky downstreams' (FLAKY_HTTP_ADDR, FLAKY_SMTP_ADDR).
	API, FlakyHTTP, FlakySMTP string
}

// Listening reads where relay all listens from the log Run writes: the
// API's and the flaky downstreams' "listening" lines. It is how a caller
// that gave Run addresses at port 0 learns the ports the system chose,
// which no other program can take from it; a port found free beforehand
// and closed again may be taken by then. ok is false until both lines are
// there; in the log of several runs, the last of each counts.
func Listening(log string) (a Addrs, ok bool) {
	for line := range strings.SplitSeq(log, "\n") {
		if !strings.Contains(line, `"msg":"listening"`) {
			continue
		}
		var l struct {
			Msg      string `json:"msg"`
			Service  string `json:"service"`
			Addr     string `json:"addr"`
			HTTPAddr string `json:"http_addr"`
			SMTPAddr string `json:"smtp_addr"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "listening" {
			continue
		}
		switch l.Service {
		case "api":
			a.API = l.Addr
		case "flaky":
			a.FlakyHTTP, a.FlakySMTP = l.HTTPAddr, l.SMTPAddr
		}
	}
	return a, a.API != "" && a.FlakyHTTP != "" && a.FlakySMTP != ""
}
