// Package faults holds relay's fault tests: they check the promise that
// nothing is lost, that every notification the API accepted (202) is in the
// end delivered to its downstream or parked with a reason, while the broker
// restarts, the relay process is killed with SIGKILL, the network to the
// broker is cut or slowed, and poison messages are put straight into the
// pipeline's queues.
//
// The tests live behind the build tag "faults" and need a RabbitMQ broker
// on localhost that this machine controls with rabbitmqctl:
//
//	go test -race -count=1 -tags faults -timeout 15m -v ./lab/faults/
//
// or, with RELAY_BROKER=VERSION, a node of that version that
// deploy/broker.sh runs (its run command sets RELAY_BROKER, AMQP_URL and
// MANAGEMENT_URL), restarted with that script, as root; the machine's own
// broker is then never touched:
//
//	make test-faults BROKER=4.3
//
// Each test prints one summary line,
//
//	accepted N delivered N parked N lost N duplicates N
//
// counted in channel copies (a notification with an email and a webhook
// part is two copies), with lost = accepted - delivered - parked, and fails
// when lost is not zero. Every test is bounded in time, targets loopback
// only, and leaves the broker running, whatever happens.
package faults
