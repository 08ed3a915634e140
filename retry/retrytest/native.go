package retrytest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/testcontainers/testcontainers-go"
	tcrabbit "github.com/testcontainers/testcontainers-go/modules/rabbitmq"

	"github.com/relay-demo/relay/retry"
)

// NativeImage is the RabbitMQ image started for tests of the native delay
// backend when the broker at hand is older than RabbitMQ 4.3.
const NativeImage = "rabbitmq:4.3-management"

var (
	nativeOnce   sync.Once
	nativeURL    string
	nativeSkip   string
	nativeFailed error
)

// NativeURL returns the address of a RabbitMQ 4.3 or later broker, for
// tests of the native delay backend (retry.Native, the broker's own delayed
// retry for quorum queues). It takes the broker at hand, AMQP_URL if set,
// else localhost:5672, when that broker reports 4.3 or later, and otherwise
// starts a NativeImage container with testcontainers.
//
// Where there is no such broker, Lacks ends the test: when
// RELAY_EXPECT_BACKENDS names native (make test-compat's 4.3 node), the
// broker at hand had to be it, no container is tried, and the test fails;
// otherwise it is skipped with the reason, under CI=true too: a CI broker
// older than 4.3 (the default 3.10) runs no native cell. So is a machine
// without Docker, or whose Docker engine cannot pull the image (no registry
// answers). A reachable Docker engine that has the image and fails to
// start the container fails the test.
func NativeURL(tb testing.TB) string {
	tb.Helper()
	nativeOnce.Do(func() { nativeURL, nativeSkip, nativeFailed = findNative() })
	if nativeFailed != nil {
		tb.Fatalf("no RabbitMQ 4.3 broker for the native delay backend: %v", nativeFailed)
	}
	if nativeURL == "" {
		Lacks(tb, string(retry.Native), "the native delay backend needs RabbitMQ 4.3 or later: %s", nativeSkip)
	}
	return nativeURL
}

// findNative returns a 4.3 broker's URL, or why there is none: a reason to
// skip, or an error that should fail the test.
func findNative() (u, skip string, failed error) {
	atHand, name := localURL, "the broker on localhost:5672"
	if env := os.Getenv("AMQP_URL"); env != "" {
		atHand, name = env, "the broker at AMQP_URL ("+retry.RedactURL(env)+")"
	}
	var why string
	switch v, err := Version(atHand); {
	case err != nil:
		why = fmt.Sprintf("%s does not answer: %v", name, retry.RedactError(err, atHand))
	case retry.VersionAtLeast(v, 4, 3):
		return atHand, "", nil
	default:
		why = fmt.Sprintf("%s is RabbitMQ %s, older than 4.3", name, v)
	}
	if Expects(string(retry.Native)) {
		// The broker at hand was started to be the 4.3 one: no other.
		return "", why, nil
	}
	if err := dockerReachable(); err != nil {
		return "", fmt.Sprintf("%s, and no Docker engine is reachable for testcontainers (%s: %v)", why, dockerLooked(), err), nil
	}
	u, err := startRabbit(NativeImage)
	if err != nil && unpullable(err) {
		// A Docker engine with no registry to pull from (an offline
		// machine, or CI here): no RabbitMQ 4.3 to be had this way.
		return "", fmt.Sprintf("%s; Docker is reachable but cannot pull %s (%v); make test-compat runs these tests on a RabbitMQ 4.3 node of its own", why, NativeImage, err), nil
	}
	if err != nil {
		return "", "", fmt.Errorf("%s; Docker is reachable, but %s did not start: %w", why, NativeImage, err)
	}
	v, err := Version(u)
	if err != nil {
		return "", "", fmt.Errorf("the %s container does not answer: %w", NativeImage, err)
	}
	if !retry.VersionAtLeast(v, 4, 3) {
		return "", "", fmt.Errorf("the %s container reports RabbitMQ %s", NativeImage, v)
	}
	return u, "", nil
}

// unpullable reports whether err says an image could not be pulled: no
// registry answers, or it does not have the image.
func unpullable(err error) bool {
	msg := err.Error()
	for _, s := range []string{"registry", "pull access denied", "manifest unknown", "no such image", "No such image"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// Version returns the RabbitMQ version the broker at u reports when a
// client connects, such as "3.10.8".
func Version(u string) (string, error) {
	conn, err := amqp.DialConfig(u, amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	v, _ := conn.Properties["version"].(string)
	if v == "" {
		return "", fmt.Errorf("the broker reports no version")
	}
	return v, nil
}

// dockerReachable asks the Docker engine testcontainers would use for its
// info: nil if it answers.
func dockerReachable() (err error) {
	defer func() {
		// Some Docker-less environments make the Docker client panic.
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return err
	}
	return p.Health(ctx)
}

// dockerLooked says where a Docker engine was looked for, for a skip
// message: testcontainers' own error names only the last place it tried.
func dockerLooked() string {
	where := "DOCKER_HOST unset"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		where = "DOCKER_HOST=" + h
	}
	if _, err := os.Stat("/var/run/docker.sock"); err != nil {
		where += ", no /var/run/docker.sock"
	} else {
		where += ", /var/run/docker.sock does not answer"
	}
	return where
}

// startRabbit starts image with testcontainers and returns its AMQP URL.
// The container lives as long as the test binary; testcontainers' reaper
// removes it afterwards.
func startRabbit(image string) (u string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("docker client panicked: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := tcrabbit.Run(ctx, image)
	if err != nil {
		return "", err
	}
	return c.AmqpURL(ctx)
}

// PluginURL returns the address of the broker at hand (URL) when it has
// the delayed-message plugin, for tests of the plugin delay backend.
// Without it Lacks ends the test: a failure when
// RELAY_EXPECT_BACKENDS names plugin (make test-compat's 4.0 node), a skip
// otherwise, under CI=true too (the default 3.10 broker has no plugin).
func PluginURL(tb testing.TB) string {
	tb.Helper()
	u := URL(tb)
	plugin, err := retry.HasPlugin(u)
	if err != nil {
		tb.Fatalf("probe for the delayed-message plugin: %v", err)
	}
	if !plugin {
		Lacks(tb, string(retry.Plugin), "the broker has no x-delayed-message exchange type (the rabbitmq_delayed_message_exchange plugin is not enabled)")
	}
	return u
}
