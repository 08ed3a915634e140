// Package compose runs the docker compose demo for real and checks it from
// outside, as a user would see it: every service healthy, notifications
// retried on the schedule and delivered or parked, a batch of 100 all in
// the history, the broker stopped and killed mid-run with nothing lost,
// down and up keeping the history, the waiting retries and the dead-letter
// queue, a scaled worker, and the cluster profile with a node stopped.
//
// The test lives behind the build tag "compose" and needs a Docker engine
// with compose v2, the images' base images and a free subnet; make
// test-compose (lab/compose/test.sh) provides them and runs it.
package compose
