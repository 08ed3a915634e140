// Package deploy holds relay's container images and the demo's broker and
// Prometheus configuration; its tests check docker-compose.yml and the
// Dockerfiles without a Docker engine: every command is one the relay
// binary lists, every variable one relay reads and accepts, every address
// one a service listens on, and every base image pinned.
package deploy
