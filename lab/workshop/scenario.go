package workshop

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/relay-demo/relay/demo/flaky"
)

// Scenario is what the downstream does to a run's notifications, and how
// they arrive.
type Scenario struct {
	// Name selects the scenario on the command line.
	Name string
	// Summary says what happens, in a sentence.
	Summary string
	// N is the default number of notifications.
	N int
	// Rate is how many notifications arrive per second. They are all
	// published before the clock starts; the broker releases them at this
	// rate (see release).
	Rate float64
	// Cost is how long every attempt takes the downstream, failed or not.
	Cost time.Duration
	// Sick is the share of notifications, chosen by the seed, that fail
	// every attempt while they are sick.
	Sick float64
	// SickFor is how long a sick notification stays sick after its first
	// attempt; zero means for ever.
	SickFor time.Duration
	// Base decides every attempt of the notifications that are not sick,
	// with relay's fake downstream (flaky.Scenario.Decide); its zero value
	// accepts them all.
	Base flaky.Scenario
}

// Scenarios lists the scenarios; the first is the default.
func Scenarios() []Scenario {
	common := Scenario{N: 200, Rate: 200, Cost: 2 * time.Millisecond}
	sickTenth := common
	sickTenth.Name, sickTenth.Sick, sickTenth.SickFor = "sick-tenth", 0.1, 900*time.Millisecond
	sickTenth.Summary = "one notification in ten fails every attempt during the 900ms after its first attempt; the other nine never fail"
	poison := common
	poison.Name, poison.Sick = "poison", 0.05
	poison.Summary = "one notification in twenty fails every attempt, for ever; the rest never fail"
	flakyOne := common
	flakyOne.Name, flakyOne.Base = "flaky", flaky.Scenario{Name: flaky.Flaky, Rate: 0.3}
	flakyOne.Summary = "every attempt of every notification fails with probability 0.3 (seeded)"
	outage := common
	outage.Name, outage.Base = "outage", flaky.Scenario{Name: flaky.Outage, Outage: 1500 * time.Millisecond}
	outage.Summary = "the downstream refuses everything for the first 1.5s of the run, then accepts everything"
	healthy := common
	healthy.Name = "healthy"
	healthy.Summary = "every attempt succeeds: the baseline"
	return []Scenario{sickTenth, poison, flakyOne, outage, healthy}
}

// FindScenario returns the named scenario.
func FindScenario(name string) (Scenario, error) {
	var names []string
	for _, s := range Scenarios() {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q: want one of %v", name, names)
}

// healthy is the scenario with every failure taken out: the same arrivals
// and costs, for the baseline.
func (s Scenario) healthy() Scenario {
	s.Name, s.Sick, s.SickFor, s.Base = s.Name+" (no failures)", 0, 0, flaky.Scenario{}
	return s
}

// sickSet picks exactly round(len(ids) × Sick) notifications, the same ones
// for the same seed.
func (s Scenario) sickSet(ids []string, seed uint64) map[string]bool {
	n := int(math.Round(float64(len(ids)) * s.Sick))
	out := make(map[string]bool, n)
	if n <= 0 {
		return out
	}
	order := rand.New(rand.NewPCG(seed, 0x5eed)).Perm(len(ids))
	for _, i := range order[:n] {
		out[ids[i]] = true
	}
	return out
}

// verdict is the downstream's answer to one attempt.
type verdict struct {
	ok   bool
	note string
}

// judge decides one attempt: sick notifications fail while they are sick,
// the rest are left to the base scenario.
type judge struct {
	s     Scenario
	seed  uint64
	start time.Time
	sick  map[string]bool
}

func newJudge(s Scenario, ids []string, seed uint64, start time.Time) judge {
	return judge{s: s, seed: seed, start: start, sick: s.sickSet(ids, seed)}
}

// decide answers attempt (from 1) of id at now; first is when the id's
// first attempt began.
func (j judge) decide(id string, attempt int, first, now time.Time) verdict {
	if j.sick[id] {
		if j.s.SickFor == 0 {
			return verdict{note: "503: this notification always fails"}
		}
		if now.Before(first.Add(j.s.SickFor)) {
			return verdict{note: fmt.Sprintf("503: sick until %s after its first attempt", j.s.SickFor)}
		}
	}
	if j.s.Base.Name == "" {
		return verdict{ok: true}
	}
	base := j.s.Base
	base.Channel, base.Seed, base.Start = flaky.Webhook, j.seed, j.start
	o := base.Decide(id, attempt, "/webhooks/workshop", now)
	if o.Accept {
		return verdict{ok: true}
	}
	return verdict{note: fmt.Sprintf("%d: %s", o.Code, o.Reason)}
}
