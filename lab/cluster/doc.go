// Package cluster holds relay's cluster test, and nothing else: it is
// test-only code, behind the build tag "cluster".
//
// The test starts a RabbitMQ cluster of three nodes from the local
// rabbitmq-server installation (relay-c1@localhost, relay-c2@localhost and
// relay-c3@localhost, each with ports and a data directory of its own
// under a temporary directory, joined with rabbitmqctl join_cluster), runs
// `relay all` in-process against it with AMQP_URLS naming the three nodes,
// quorum queues and the TTL delay backend, and posts 5,000 notifications,
// 30 a second, that fail 30 % of their attempts, while it, each time after
// a stretch of steady traffic,
//
//  1. kills with SIGKILL the node leading the most work queues, then
//     starts it again;
//  2. kills with SIGKILL the node leading the most wait queues, then
//     starts it again;
//  3. restarts the three nodes one after the other (a rolling restart),
//     each once no quorum queue depends on it for its majority.
//
// The last 10 % of the notifications wait until the rolling restart is
// over, so that every scenario runs under load to its end.
//
// Then it checks that every copy the API accepted was delivered or parked,
// and prints, for each scenario (the notifications accepted from its start,
// or from the beginning for the first, until the next one's) and in total: accepted, delivered, parked, lost and
// duplicates, counted in channel copies, and the time to recover: the
// longest the API went without accepting a notification, or a channel
// without delivering a copy, while the fault lasted (under the test's
// steady load, a few tens of milliseconds when nothing stalls).
//
// RabbitMQ 3.10's at-least-once dead-letter worker of a quorum queue can
// stop around a leader election and not come back: the queue then holds
// the messages it dead-lettered (a failure nacked from a work queue, a
// wait that expired), counted but neither ready nor unacknowledged, until
// its next leader starts a worker. Nothing is lost, but nothing moves.
// When the settling copies go 20 s without a delivery and a queue holds
// such messages, the test does what docs/cluster.md tells an operator to do:
// it moves the queue's leader (rabbitmq-queues delete_member, then
// add_member), at most twice per queue, and reports each move.
//
// With RELAY_BROKER=VERSION (make test-cluster BROKER=4.3) the nodes run
// RabbitMQ VERSION from deploy/broker.sh's root of that version instead,
// chrooted there, under a directory of the root's /tmp, registered with an
// epmd of the test's own on port 4383; the test mounts the root with
// deploy/broker.sh mount and unmounts it at the end with deploy/broker.sh
// unmount, which leaves it mounted while another node runs from it.
// CLUSTER_DELAY_BACKEND=native runs relay on RabbitMQ 4.3's delayed retry
// (no wait queues: the second kill takes the error queue's leader).
//
// It needs root, to run the nodes as the rabbitmq user so that rabbitmqctl
// reaches them with that user's Erlang cookie. The default broker
// (rabbit@localhost, port 5672) is never touched: the test records its
// process and cluster before, checks they are the same after, and fails if
// a node of its own is left running. Every node is stopped and the
// directory removed when the test ends, failed or not.
//
//	make test-cluster
//	go test -race -count=1 -tags cluster -timeout 15m -v ./lab/cluster/
package cluster
