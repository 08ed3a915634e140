// Package tests is the module of the suites that check relay from outside:
// the fault and cluster suites, the compose demo run for real, and the
// checks of docker-compose.yml and the Dockerfiles. It is a module of its
// own so that their requirements (compose-go, buildkit, toxiproxy, …) stay
// out of the go.mod a copy of relay inherits.
package tests
