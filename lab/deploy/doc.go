// Package deploy tests what the top-level deploy directory holds (relay's
// container images, the demo's broker and Prometheus configuration) and
// docker-compose.yml, without a Docker engine: every command is one the relay
// binary lists, every variable one relay reads and accepts, every address
// one a service listens on, and every base image pinned.
package deploy
