// Package compose runs the docker compose demo for real and checks it from
// outside, as a user would see it: every service healthy, relay running
// the delay backend the demo sets (the delayed-message plugin, unless the
// run sets another), notifications retried on the schedule and delivered
// or parked, a batch of 100 all in the history, the broker stopped twice
// mid-run with nothing lost (stopped, then killed with SIGKILL, where the
// run sets quorum queues and a backend whose waits are queues), down and
// up keeping the history, the waiting retries and the dead-letter queue, a
// scaled worker, and the cluster profile with a node stopped.
//
// The test lives behind the build tag "compose" and needs a Docker engine
// with compose v2, the images' base images and a free subnet; make
// test-compose (lab/compose/test.sh) provides them and runs it.
package compose
