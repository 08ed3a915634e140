package deploy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/distribution/reference"
	"github.com/moby/buildkit/frontend/dockerfile/command"
	yaml "go.yaml.in/yaml/v3"

	"github.com/relay-demo/relay/demo/flaky"
	"github.com/relay-demo/relay/services/api"
	"github.com/relay-demo/relay/services/retrier"
	"github.com/relay-demo/relay/services/worker"
	"github.com/relay-demo/relay/webhooks"
)

const (
	composeFile = "docker-compose.yml"
	// relayDockerfile builds the one image every relay service runs.
	relayDockerfile = "deploy/relay/Dockerfile"
	// brokerContext builds the broker, with the delayed-message plugin.
	brokerContext = "deploy/rabbitmq"
	// defaultStopGrace is how long docker waits after SIGTERM before it
	// kills a container whose stop_grace_period is unset.
	defaultStopGrace = 10 * time.Second
	// clusterProfile holds the three-node cluster and the relay services
	// configured for it, beside the single-node demo.
	clusterProfile = "cluster"
)

// imagePorts lists the container ports the services that do not run relay
// listen on, by image: the broker's AMQP, management UI and Prometheus
// (rabbitmq_prometheus, on in the official image) ports, and Prometheus's.
var imagePorts = map[string][]int{
	brokerContext:          {5672, 15672, 15692},
	"prom/prometheus":      {9090},
	"jaegertracing/jaeger": {4317, 4318, 16686},
}

// stack is docker-compose.yml as docker compose loads it (every profile
// on, no variable set in the shell, so the file's defaults apply), with the
// relay command each service of the relay image runs.
type stack struct {
	project *types.Project
	// commands maps the services that run the relay image to their
	// command ("worker email"), args to that command's arguments.
	commands map[string]string
	args     map[string][]string
	relay    string // the relay image's name
	binary   string // the relay binary, built from this tree
}

// loadStack loads the stack and splits each relay service's command
// against the command table of the relay binary at path relay.
func loadStack(t *testing.T, relay string) *stack {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{filepath.Join(repoRoot, composeFile)},
		cli.WithWorkingDirectory(repoRoot),
		cli.WithProfiles([]string{"*"}),
	)
	if err != nil {
		t.Fatal(err)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("load %s: %v", composeFile, err)
	}
	s := &stack{project: project, commands: map[string]string{}, args: map[string][]string{}, binary: relay}

	var builders []string
	for name, svc := range project.Services {
		if svc.Build != nil && s.dockerfile(svc) == relayDockerfile {
			builders = append(builders, name)
			s.relay = svc.Image
		}
	}
	if len(builders) != 1 || s.relay == "" {
		t.Fatalf("want one service building %s with an image name, so every relay service shares it; got %q", relayDockerfile, builders)
	}
	table := relayCommands(t, relay)
	for name, svc := range project.Services {
		if svc.Image != s.relay {
			continue
		}
		if svc.Build != nil && s.dockerfile(svc) != relayDockerfile {
			t.Errorf("service %s: builds %s under the relay image's name %s", name, s.dockerfile(svc), s.relay)
		}
		cmd, rest, ok := splitCommand(table, svc.Command)
		if !ok {
			t.Errorf("service %s: command %q is no relay command; relay help lists %q", name, svc.Command, table)
			continue
		}
		s.commands[name] = cmd
		s.args[name] = rest
	}
	return s
}

// dockerfile returns the path, from the repository root, of the
// Dockerfile svc builds.
func (s *stack) dockerfile(svc types.ServiceConfig) string {
	df := svc.Build.Dockerfile
	if df == "" {
		df = "Dockerfile"
	}
	if !filepath.IsAbs(df) {
		df = filepath.Join(svc.Build.Context, df)
	}
	rel, err := filepath.Rel(s.project.WorkingDir, df)
	if err != nil {
		return df
	}
	return filepath.ToSlash(rel)
}

// context returns the build context of svc from the repository root, or
// "" for a service that builds nothing.
func (s *stack) context(svc types.ServiceConfig) string {
	if svc.Build == nil {
		return ""
	}
	rel, err := filepath.Rel(s.project.WorkingDir, svc.Build.Context)
	if err != nil {
		return svc.Build.Context
	}
	return filepath.ToSlash(rel)
}

// command returns the relay command a service runs, "" for none.
func (s *stack) command(name string) string { return s.commands[name] }

// inCluster reports whether a service belongs to the cluster profile.
func (s *stack) inCluster(name string) bool {
	return slices.Contains(s.project.Services[name].Profiles, clusterProfile)
}

// running returns the one service of the single-node demo that runs the
// relay command cmd.
func (s *stack) running(t *testing.T, cmd string) string {
	t.Helper()
	return s.runningIn(t, cmd, false)
}

// runningIn returns the one service that runs the relay command cmd in
// the cluster profile (cluster) or in the single-node demo. A command the
// cluster profile does not run itself is the demo's, which both share
// (the flaky downstreams).
func (s *stack) runningIn(t *testing.T, cmd string, cluster bool) string {
	t.Helper()
	var names []string
	for name, c := range s.commands {
		if c == cmd && s.inCluster(name) == cluster {
			names = append(names, name)
		}
	}
	if cluster && len(names) == 0 {
		return s.runningIn(t, cmd, false)
	}
	if len(names) > 1 && slices.Contains(names, cmd) {
		// Several run it (the demo's two mail servers): the one named
		// for the command is the main one.
		return cmd
	}
	if len(names) != 1 {
		t.Fatalf("want one service running relay %s (cluster profile: %v), got %q", cmd, cluster, names)
	}
	return names[0]
}

// getenv returns a lookup in a service's environment, as the process in
// its container would see it.
func (s *stack) getenv(name string) func(string) string {
	environment := s.project.Services[name].Environment
	return func(key string) string {
		if v := environment[key]; v != nil {
			return *v
		}
		return ""
	}
}

// broker returns the single-node demo's broker: the service outside the
// cluster profile built from brokerContext.
func (s *stack) broker(t *testing.T) string {
	t.Helper()
	for name, svc := range s.project.Services {
		if s.context(svc) == brokerContext && !s.inCluster(name) {
			return name
		}
	}
	t.Fatalf("no service builds %s", brokerContext)
	return ""
}

// clusterNodes returns the cluster profile's broker nodes, the services in
// it built from brokerContext, sorted.
func (s *stack) clusterNodes() []string {
	var out []string
	for name, svc := range s.project.Services {
		if s.context(svc) == brokerContext && s.inCluster(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// listens returns the container ports a service listens on: a relay
// service's from the configuration it parses, any other's from
// imagePorts.
func (s *stack) listens(t *testing.T, name string) []int {
	t.Helper()
	svc := s.project.Services[name]
	getenv := s.getenv(name)
	var addrs []string
	switch s.command(name) {
	case "api":
		cfg, err := api.LoadConfig(getenv)
		if err != nil {
			t.Fatalf("service %s: %v", name, err)
		}
		addrs = append(addrs, cfg.HTTPAddr)
	case "worker email", "worker webhook", "worker sms", "retrier":
		b, err := loadBroker(s.command(name), getenv)
		if err != nil {
			t.Fatalf("service %s: %v", name, err)
		}
		addrs = append(addrs, b.MetricsAddr)
	case "flaky":
		cfg, err := flaky.LoadConfig(getenv)
		if err != nil {
			t.Fatalf("service %s: %v", name, err)
		}
		addrs = append(addrs, cfg.HTTPAddr, cfg.SMTPAddr)
	case "":
		key := s.context(svc)
		if key == "" {
			ref, err := reference.ParseNormalizedNamed(svc.Image)
			if err != nil {
				t.Fatalf("service %s: image %q: %v", name, svc.Image, err)
			}
			key = reference.FamiliarName(ref)
		}
		ports, ok := imagePorts[key]
		if !ok {
			t.Fatalf("service %s: no known ports for %s; add them to imagePorts", name, key)
		}
		return ports
	}
	var ports []int
	for _, addr := range addrs {
		if addr == "" {
			continue
		}
		ports = append(ports, port(t, addr))
	}
	return ports
}

// port returns the port of a host:port address.
func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: port: %v", addr, err)
	}
	return n
}

// flagValue returns the value of --name (or -name) in a command line.
func flagValue(args []string, name string) string {
	for i, a := range args {
		a = "-" + strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
			return v
		}
		if a == "-"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// checkURL fails t unless raw names service, on a port it listens on.
func (s *stack) checkURL(t *testing.T, where, raw, service string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Errorf("%s: %q is not a URL", where, raw)
		return
	}
	if u.Hostname() != service {
		t.Errorf("%s: %q: host %q, want the %s service", where, raw, u.Hostname(), service)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Errorf("%s: %q: want an explicit port", where, raw)
		return
	}
	if !slices.Contains(s.listens(t, service), p) {
		t.Errorf("%s: %q: port %d, but %s listens on %v", where, raw, p, service, s.listens(t, service))
	}
}

// TestCompose checks docker-compose.yml, as docker compose loads it,
// against relay itself: the binary's command table, the configuration its
// services parse, and the addresses they listen on.
func TestCompose(t *testing.T) {
	s := loadStack(t, buildRelay(t))
	for _, c := range []struct {
		name  string
		check func(*testing.T, *stack)
	}{
		{"commands", checkCommands},
		{"sender arguments", checkSenderArguments},
		{"depends_on", checkDependsOn},
		{"environment", checkEnvironment},
		{"configuration accepted", checkConfigAccepted},
		{"wiring", checkWiring},
		{"ports", checkPorts},
		{"shutdown", checkShutdown},
		{"builds and images", checkBuilds},
		{"prometheus targets", checkPrometheusTargets},
		{"cluster", checkCluster},
		{"health checks", checkHealth},
		{"writable /tmp", checkTmp},
		{"ports on loopback", checkLoopback},
		{"broker data on volumes", checkBrokerVolumes},
		{"pull policy", checkPullPolicy},
	} {
		t.Run(c.name, func(t *testing.T) { c.check(t, s) })
	}
}

func checkCommands(t *testing.T, s *stack) {
	for _, c := range []struct {
		cluster bool
		want    []string
	}{
		{false, []string{"api", "flaky", "retrier", "send"}},
		// The cluster profile shares the demo's flaky downstreams.
		{true, []string{"api", "retrier", "send"}},
	} {
		// A worker for every channel.
		for _, ch := range worker.Channels() {
			c.want = append(c.want, "worker "+ch.Name)
		}
		slices.Sort(c.want)
		var got []string
		for name := range s.commands {
			if s.inCluster(name) == c.cluster {
				got = append(got, s.command(name))
			}
		}
		slices.Sort(got)
		got = slices.Compact(got) // the demo runs two flaky downstreams
		if !slices.Equal(got, c.want) {
			t.Errorf("relay commands run (cluster profile: %v) = %q, want %q", c.cluster, got, c.want)
		}
	}
	for name, rest := range s.args {
		if s.command(name) != "send" && len(rest) > 0 {
			t.Errorf("service %s: relay %s takes no arguments (it is configured by environment), got %q", name, s.command(name), rest)
		}
	}
}

// checkSenderArguments runs the sender's command line against a
// stand-in API that answers 503, so relay send checks its flags and values
// as it would in its container and stops at the first request.
func checkSenderArguments(t *testing.T, s *stack) {
	for _, cluster := range []bool{false, true} {
		name := s.runningIn(t, "send", cluster)
		t.Run(name, func(t *testing.T) { checkSender(t, s, name) })
	}
}

func checkSender(t *testing.T, s *stack, name string) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "stand-in API", http.StatusServiceUnavailable)
	}))
	defer api.Close()

	// --wait 0: relay send would otherwise wait out the 503.
	args := append(slices.Clone(s.project.Services[name].Command), "--api", api.URL, "--wait", "0s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.binary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range s.project.Services[name].Environment {
		if v != nil {
			cmd.Env = append(cmd.Env, k+"="+*v)
		}
	}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("relay %q succeeded against an API that answers 503:\n%s", args, out)
	}
	if !strings.Contains(string(out), "503") {
		t.Errorf("relay %q stopped before reaching the API:\n%s", args, out)
	}
}

func checkDependsOn(t *testing.T, s *stack) {
	broker := s.broker(t)
	if hc := s.project.Services[broker].HealthCheck; hc == nil || hc.Disable || len(hc.Test) == 0 {
		t.Errorf("service %s has no health check: nothing can wait for it to be healthy", broker)
	}
	for name, svc := range s.project.Services {
		for dep := range svc.DependsOn {
			if _, ok := s.project.Services[dep]; !ok {
				t.Errorf("service %s depends on %s, which is not a service", name, dep)
			}
		}
		switch s.command(name) {
		case "api", "worker email", "worker webhook", "retrier":
		default:
			continue
		}
		// A process on the pipeline declares the topology at start; on
		// the cluster, once every node is up, so that each quorum queue
		// gets a replica on each.
		brokers := []string{broker}
		if s.inCluster(name) {
			brokers = s.clusterNodes()
		}
		for _, b := range brokers {
			if got := svc.DependsOn[b].Condition; got != types.ServiceConditionHealthy {
				t.Errorf("service %s: depends_on %s condition %q, want %q", name, b, got, types.ServiceConditionHealthy)
			}
		}
	}
}

func checkEnvironment(t *testing.T, s *stack) {
	for name, svc := range s.project.Services {
		run := s.command(name)
		if run == "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			reads := readVariables(t, run)
			for key := range svc.Environment {
				if next, ok := retired[key]; ok {
					t.Errorf("sets %s, which relay no longer reads and refuses to start with: use %s", key, next)
					continue
				}
				if !reads[key] {
					t.Errorf("sets %s, which relay %s does not read", key, run)
				}
			}
		})
	}
}

// checkConfigAccepted runs each service's environment through the parsers
// and checks relay itself runs at start.
func checkConfigAccepted(t *testing.T, s *stack) {
	// Each worker checks its environment as at start, without dialling:
	// its own settings, the topology, the channel's secret, allow-list and
	// retired variables.
	workerCheck := func(channel string) func(getenv func(string) string) error {
		return func(getenv func(string) string) error { return worker.Check(channel, getenv) }
	}
	checks := map[string]func(getenv func(string) string) error{
		"api": func(getenv func(string) string) error {
			_, err := api.LoadConfig(getenv)
			return err
		},
		"flaky": func(getenv func(string) string) error {
			_, err := flaky.LoadConfig(getenv)
			return err
		},
		"retrier": func(getenv func(string) string) error {
			_, err := retrier.LoadConfig(getenv)
			return err
		},
		"worker email":   workerCheck("email"),
		"worker webhook": workerCheck("webhook"),
		"worker sms":     workerCheck("sms"),
		"send":           nil, // checkSenderArguments runs it
	}
	for name := range s.commands {
		run := s.command(name)
		check, ok := checks[run]
		if !ok {
			t.Errorf("service %s: no check for relay %s", name, run)
			continue
		}
		if check == nil {
			continue
		}
		if err := check(s.getenv(name)); err != nil {
			t.Errorf("service %s: relay %s refuses its environment: %v", name, run, err)
		}
	}
}

// checkWiring checks that the addresses, tokens and secrets one
// service gives for another are the ones that other uses.
func checkWiring(t *testing.T, s *stack) {
	broker := s.broker(t)
	for name, svc := range s.project.Services {
		if v := svc.Environment["AMQP_URL"]; v != nil {
			s.checkURL(t, name+" AMQP_URL", *v, broker)
		}
	}
	for _, cluster := range []bool{false, true} {
		t.Run(fmt.Sprintf("cluster profile %v", cluster), func(t *testing.T) { checkStackWiring(t, s, cluster) })
	}
}

// checkMailServers checks that each mail server the email worker
// service names (SMTP_HOST, or SMTP_1_HOST … with SMTP_PROVIDERS) is a
// flaky service, on the port it serves SMTP on; the first is downstream.
func (s *stack) checkMailServers(t *testing.T, email, downstream string) {
	t.Helper()
	n, err := strconv.Atoi(s.setting(t, email, "SMTP_PROVIDERS"))
	if err != nil {
		t.Fatalf("%s: SMTP_PROVIDERS: %v", email, err)
	}
	prefixes := []string{"SMTP_"}
	if n > 0 {
		prefixes = nil
		for i := 1; i <= n; i++ {
			prefixes = append(prefixes, fmt.Sprintf("SMTP_%d_", i))
		}
	}
	for i, prefix := range prefixes {
		host := s.setting(t, email, prefix+"HOST")
		portVar := prefix + "PORT"
		if s.getenv(email)(portVar) == "" {
			portVar = "SMTP_PORT"
		}
		smtpPort, err := strconv.Atoi(s.setting(t, email, portVar))
		if err != nil {
			t.Fatalf("%s: %s: %v", email, portVar, err)
		}
		server := host
		if i == 0 {
			server = downstream
		}
		if _, ok := s.project.Services[server]; !ok || s.command(server) != "flaky" {
			t.Errorf("%s: %sHOST=%s is no service running relay flaky", email, prefix, host)
			continue
		}
		s.checkURL(t, email+" "+prefix+"HOST:"+portVar, "smtp://"+net.JoinHostPort(host, strconv.Itoa(smtpPort)), server)
		cfg, err := flaky.LoadConfig(s.getenv(server))
		if err != nil {
			t.Fatal(err)
		}
		if want := port(t, cfg.SMTPAddr); smtpPort != want {
			t.Errorf("%s: %s %d, but %s serves SMTP on %d", email, portVar, smtpPort, server, want)
		}
	}
}

// checkGateways checks that each SMS gateway the sms worker service
// names (SMS_URL, or SMS_1_URL … with SMS_PROVIDERS) is the /webhooks/sms
// of a flaky service, signed with the SMS_SECRET that service checks and
// not with its WEBHOOK_SECRET; the first is downstream.
func (s *stack) checkGateways(t *testing.T, sms, downstream string) {
	t.Helper()
	n, err := strconv.Atoi(s.setting(t, sms, "SMS_PROVIDERS"))
	if err != nil {
		t.Fatalf("%s: SMS_PROVIDERS: %v", sms, err)
	}
	prefixes := []string{"SMS_"}
	if n > 0 {
		prefixes = nil
		for i := 1; i <= n; i++ {
			prefixes = append(prefixes, fmt.Sprintf("SMS_%d_", i))
		}
	}
	for i, prefix := range prefixes {
		raw := s.setting(t, sms, prefix+"URL")
		u, err := url.Parse(raw)
		if err != nil || u.Path != "/webhooks/sms" {
			t.Errorf("%s: %sURL %q, want a flaky gateway's /webhooks/sms", sms, prefix, raw)
			continue
		}
		server := u.Hostname()
		if i == 0 {
			server = downstream
		}
		if _, ok := s.project.Services[server]; !ok || s.command(server) != "flaky" {
			t.Errorf("%s: %sURL=%s is no service running relay flaky", sms, prefix, raw)
			continue
		}
		s.checkURL(t, sms+" "+prefix+"URL", raw, server)
		cfg, err := flaky.LoadConfig(s.getenv(server))
		if err != nil {
			t.Fatal(err)
		}
		secret := s.getenv(sms)(prefix + "SECRET")
		if prefix == "SMS_" || secret == "" {
			secret = s.setting(t, sms, "SMS_SECRET")
		}
		if cfg.SMSSecret != "" && secret != cfg.SMSSecret {
			t.Errorf("%s signs %sURL with a secret other than the SMS_SECRET %s checks", sms, prefix, server)
		}
		if webhooks.SameKey(secret, cfg.WebhookSecret) {
			t.Errorf("%s signs %sURL with the WEBHOOK_SECRET of %s: every webhook receiver could sign gateway requests", sms, prefix, server)
		}
		if len(s.sharedSubnets(t, sms, server)) == 0 {
			t.Errorf("%s and %s share no network with a fixed subnet", sms, server)
		}
	}
}

// checkStackWiring checks the wiring of the single-node demo's services,
// or of the cluster profile's, between themselves and the downstreams.
func checkStackWiring(t *testing.T, s *stack, cluster bool) {
	apiSvc := s.runningIn(t, "api", cluster)
	downstream := s.runningIn(t, "flaky", cluster)
	flakyCfg, err := flaky.LoadConfig(s.getenv(downstream))
	if err != nil {
		t.Fatal(err)
	}

	email := s.runningIn(t, "worker email", cluster)
	s.checkMailServers(t, email, downstream)

	webhook := s.runningIn(t, "worker webhook", cluster)
	if flakyCfg.WebhookSecret != "" && s.setting(t, webhook, "WEBHOOK_SECRET") != flakyCfg.WebhookSecret {
		t.Errorf("%s signs with a WEBHOOK_SECRET other than the one %s checks", webhook, downstream)
	}
	allow, err := webhooks.ParseAllowList(s.setting(t, webhook, "WEBHOOK_ALLOW_CIDRS"))
	if err != nil {
		t.Errorf("%s: %v", webhook, err)
	}
	shared := s.sharedSubnets(t, webhook, downstream)
	if len(shared) == 0 {
		t.Errorf("%s and %s share no network with a fixed subnet, so WEBHOOK_ALLOW_CIDRS cannot name the receiver's addresses", webhook, downstream)
	}
	// Exactly the shared subnets: less and the demo's webhooks are refused,
	// more and the demo teaches allowing networks nobody delivers to.
	sortPrefixes(allow)
	if !slices.Equal(allow, shared) {
		t.Errorf("%s: WEBHOOK_ALLOW_CIDRS allows %v, want exactly %v, the subnet it shares with %s", webhook, allow, shared, downstream)
	}

	// Every channel has its worker, and sms goes to the flaky gateway,
	// signed with the secret the gateway checks.
	for _, c := range worker.Channels() {
		s.runningIn(t, "worker "+c.Name, cluster)
	}
	sms := s.runningIn(t, "worker sms", cluster)
	s.checkGateways(t, sms, downstream)
	smsAllow, err := webhooks.ParseAllowList(s.setting(t, sms, "WEBHOOK_ALLOW_CIDRS"))
	if err != nil {
		t.Errorf("%s: %v", sms, err)
	}
	sortPrefixes(smsAllow)
	if !slices.Equal(smsAllow, shared) {
		t.Errorf("%s: WEBHOOK_ALLOW_CIDRS allows %v, want exactly %v, the subnet it shares with %s", sms, smsAllow, shared, downstream)
	}

	sender := s.runningIn(t, "send", cluster)
	args := s.args[sender]
	getenv := s.getenv(sender)
	apiURL := flagValue(args, "api")
	if apiURL == "" {
		apiURL = getenv("RELAY_API")
	}
	s.checkURL(t, sender+" --api", apiURL, apiSvc)
	token := flagValue(args, "token")
	if token == "" {
		token = getenv("API_TOKEN")
	}
	apiCfg, err := api.LoadConfig(s.getenv(apiSvc))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(apiCfg.Tokens, token) {
		t.Errorf("%s: its token is not one of %s's API_TOKENS", sender, apiSvc)
	}
	hookURL := flagValue(args, "webhook-url")
	if hookURL == "" {
		hookURL = getenv("DEMO_WEBHOOK_URL")
	}
	s.checkURL(t, sender+" webhook URL", hookURL, downstream)
	if u, err := url.Parse(hookURL); err == nil && !strings.HasPrefix(u.Path, "/webhooks/") {
		t.Errorf("%s: webhook URL %q: the flaky receiver takes POST /webhooks/...", sender, hookURL)
	}
}

// sharedSubnets returns the fixed subnets of the networks services a and b
// are both attached to, sorted.
func (s *stack) sharedSubnets(t *testing.T, a, b string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for name := range s.project.Services[a].Networks {
		if _, ok := s.project.Services[b].Networks[name]; !ok {
			continue
		}
		for _, pool := range s.project.Networks[name].Ipam.Config {
			if pool == nil || pool.Subnet == "" {
				continue
			}
			p, err := netip.ParsePrefix(pool.Subnet)
			if err != nil {
				t.Errorf("network %s: subnet %q: %v", name, pool.Subnet, err)
				continue
			}
			out = append(out, p.Masked())
		}
	}
	sortPrefixes(out)
	return out
}

// sortPrefixes sorts prefixes by address, then length.
func sortPrefixes(ps []netip.Prefix) {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
}

func checkPorts(t *testing.T, s *stack) {
	published := map[string]string{}
	for name, svc := range s.project.Services {
		if svc.ContainerName != "" {
			t.Errorf("service %s: container_name %q stops it from scaling", name, svc.ContainerName)
		}
		for _, p := range svc.Ports {
			if !slices.Contains(s.listens(t, name), int(p.Target)) {
				t.Errorf("service %s: publishes container port %d, but listens on %v", name, p.Target, s.listens(t, name))
			}
			if p.Published == "" {
				continue
			}
			key := p.HostIP + ":" + p.Published + "/" + p.Protocol
			if other, dup := published[key]; dup {
				t.Errorf("host port %s is published by both %s and %s", key, other, name)
			}
			published[key] = name
		}
		switch s.command(name) {
		case "worker email", "worker webhook", "retrier":
			// Competing consumers: `--scale` starts several, which a
			// fixed host port would stop.
			if len(svc.Ports) > 0 {
				t.Errorf("service %s: publishes ports, so it cannot be scaled", name)
			}
		}
	}
	if len(published) == 0 {
		t.Error("no service publishes a port")
	}
}

// checkShutdown checks that a service's own shutdown timeout ends
// before docker kills it, so `docker compose down` lets sends in flight
// finish.
func checkShutdown(t *testing.T, s *stack) {
	for name, svc := range s.project.Services {
		v := svc.Environment["SHUTDOWN_TIMEOUT"]
		if v == nil {
			continue
		}
		timeout, err := time.ParseDuration(*v)
		if err != nil {
			t.Errorf("service %s: SHUTDOWN_TIMEOUT=%q: %v", name, *v, err)
			continue
		}
		grace := defaultStopGrace
		if svc.StopGracePeriod != nil {
			grace = time.Duration(*svc.StopGracePeriod)
		}
		if timeout >= grace {
			t.Errorf("service %s: SHUTDOWN_TIMEOUT %s, but docker kills it %s after SIGTERM", name, timeout, grace)
		}
	}
}

func checkBuilds(t *testing.T, s *stack) {
	dockerfiles := dockerfiles(t)
	for name, svc := range s.project.Services {
		if svc.Build != nil {
			// Its base images are checked with the Dockerfiles.
			df := s.dockerfile(svc)
			if !slices.Contains(dockerfiles, df) {
				t.Errorf("service %s builds %s, which is not one of %q", name, df, dockerfiles)
				continue
			}
			checkCopySources(t, df, svc.Build.Context)
			continue
		}
		if svc.Image == s.relay {
			continue // built by another service
		}
		if err := pinned(svc.Image); err != nil {
			t.Errorf("service %s: %v", name, err)
		}
	}
}

// checkCopySources checks that what the Dockerfile copies from its build
// context is there.
func checkCopySources(t *testing.T, dockerfile, context string) {
	t.Helper()
	for _, st := range parseDockerfile(t, dockerfile) {
		for _, n := range append(st.instructions(command.Copy), st.instructions(command.Add)...) {
			if slices.ContainsFunc(n.Flags, func(f string) bool { return strings.HasPrefix(f, "--from") }) {
				continue
			}
			w := words(n)
			for _, src := range w[:len(w)-1] {
				if strings.Contains(src, "://") {
					continue
				}
				if m, _ := filepath.Glob(filepath.Join(context, src)); len(m) == 0 {
					t.Errorf("%s:%d: copies %s, which is not in the build context %s", dockerfile, n.StartLine, src, context)
				}
			}
		}
	}
}

// prometheusConfig is the part of prometheus.yml the test reads.
type prometheusConfig struct {
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
		DNSSDConfigs []struct {
			Names []string `yaml:"names"`
			Type  string   `yaml:"type"`
			Port  int      `yaml:"port"`
		} `yaml:"dns_sd_configs"`
	} `yaml:"scrape_configs"`
}

func checkPrometheusTargets(t *testing.T, s *stack) {
	var prom string
	for name, svc := range s.project.Services {
		for _, v := range svc.Volumes {
			if v.Target == "/etc/prometheus/prometheus.yml" {
				prom = v.Source
			}
		}
		if prom != "" && !slices.Contains(svc.Profiles, "observability") {
			t.Errorf("service %s runs Prometheus outside the observability profile", name)
		}
		if prom != "" {
			break
		}
	}
	if prom == "" {
		t.Fatal("no service mounts a prometheus.yml")
	}
	raw, err := os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	var cfg prometheusConfig
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: %v", prom, err)
	}

	scraped := map[string]bool{}
	target := func(job, host string, p int) {
		if _, ok := s.project.Services[host]; !ok {
			t.Errorf("job %s: %s is not a service", job, host)
			return
		}
		if !slices.Contains(s.listens(t, host), p) {
			t.Errorf("job %s: %s:%d, but %s listens on %v", job, host, p, host, s.listens(t, host))
		}
		scraped[host] = true
	}
	for _, job := range cfg.ScrapeConfigs {
		for _, sc := range job.StaticConfigs {
			for _, tg := range sc.Targets {
				host, _, err := net.SplitHostPort(tg)
				if err != nil {
					t.Errorf("job %s: target %q: %v", job.JobName, tg, err)
					continue
				}
				target(job.JobName, host, port(t, tg))
			}
		}
		for _, dns := range job.DNSSDConfigs {
			if dns.Type != "A" {
				t.Errorf("job %s: DNS discovery type %q, want A (compose's DNS answers every replica's address)", job.JobName, dns.Type)
			}
			for _, host := range dns.Names {
				target(job.JobName, host, dns.Port)
			}
		}
	}
	for name := range s.commands {
		if s.inCluster(name) {
			continue // the observability profile watches the single-node demo
		}
		switch s.command(name) {
		case "api", "worker email", "worker webhook", "retrier":
			if !scraped[name] {
				t.Errorf("Prometheus does not scrape %s", name)
			}
		}
	}
}

// pinned reports why image is not pinned to a version: it must name a tag
// other than latest, or a digest.
func pinned(image string) error {
	if strings.Contains(image, "$") {
		return fmt.Errorf("image %q: a variable hides its version", image)
	}
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return fmt.Errorf("image %q: %w", image, err)
	}
	if _, ok := ref.(reference.Digested); ok {
		return nil
	}
	tagged, ok := ref.(reference.Tagged)
	switch {
	case !ok:
		return fmt.Errorf("image %q: no tag, so latest", image)
	case tagged.Tag() == "latest":
		return fmt.Errorf("image %q: latest is no version", image)
	}
	return nil
}

// checkCluster checks the cluster profile: three nodes that find each
// other and share an Erlang cookie, and relay services that list every
// node in AMQP_URLS, with quorum queues and the TTL delay backend, the
// settings a cluster needs.
func checkCluster(t *testing.T, s *stack) {
	nodes := s.clusterNodes()
	if len(nodes) != 3 {
		t.Fatalf("the cluster profile runs %d broker nodes (%q), want 3", len(nodes), nodes)
	}
	var names []string
	cookies := map[string]bool{}
	for _, name := range nodes {
		svc := s.project.Services[name]
		// The node name is rabbit@ and the host name; the peer discovery
		// list and the other nodes reach it by it.
		if svc.Hostname != name {
			t.Errorf("node %s: hostname %q, want %q, the name the others reach it by", name, svc.Hostname, name)
		}
		names = append(names, "rabbit@"+svc.Hostname)
		getenv := s.getenv(name)
		for _, key := range []string{"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS", "RABBITMQ_CTL_ERL_ARGS"} {
			cookie := flagValue(strings.Fields(getenv(key)), "setcookie")
			if cookie == "" {
				t.Errorf("node %s: %s gives no -setcookie: the nodes, and the health check's CLI, need one cookie", name, key)
			}
			cookies[cookie] = true
		}
	}
	if len(cookies) > 1 {
		t.Errorf("the cluster nodes do not share one Erlang cookie: %d different ones", len(cookies))
	}
	slices.Sort(names)
	for _, name := range nodes {
		checkPeerDiscovery(t, s, name, names)
	}

	pipeline := 0
	for name := range s.commands {
		if !s.inCluster(name) {
			continue
		}
		switch s.command(name) {
		case "api", "worker email", "worker webhook", "worker sms", "retrier":
		default:
			continue
		}
		pipeline++
		svc := s.project.Services[name]
		if _, ok := svc.DependsOn[s.broker(t)]; ok {
			t.Errorf("service %s depends on the single-node broker %s", name, s.broker(t))
		}
		getenv := s.getenv(name)
		if getenv("AMQP_URL") != "" {
			t.Errorf("service %s sets AMQP_URL, which AMQP_URLS overrides", name)
		}
		b, err := loadBroker(s.command(name), getenv)
		if err != nil {
			t.Errorf("service %s: %v", name, err)
			continue
		}
		if b.QueueType != "quorum" {
			t.Errorf("service %s: QUEUE_TYPE=%q, want quorum: classic queues live on one node and dead-letter at most once", name, b.QueueType)
		}
		if b.DelayBackend != "ttl" && b.DelayBackend != "levels" {
			t.Errorf("service %s: DELAY_BACKEND=%q, want ttl or levels: the plugin keeps delayed messages on one node, and auto would choose it", name, b.DelayBackend)
		}
		var hosts []string
		for i, u := range b.AMQPURLs {
			parsed, err := url.Parse(u)
			if err != nil {
				t.Errorf("service %s: AMQP_URLS entry %d does not parse", name, i+1)
				continue
			}
			hosts = append(hosts, parsed.Hostname())
			if slices.Contains(nodes, parsed.Hostname()) {
				s.checkURL(t, fmt.Sprintf("%s AMQP_URLS entry %d", name, i+1), u, parsed.Hostname())
			}
		}
		slices.Sort(hosts)
		if !slices.Equal(hosts, nodes) {
			t.Errorf("service %s: AMQP_URLS names %q, want each cluster node once: %q", name, hosts, nodes)
		}
	}
	if want := 2 + len(worker.Channels()); pipeline != want {
		t.Errorf("the cluster profile runs %d relay services on the pipeline, want %d (api, a worker per channel, retrier)", pipeline, want)
	}
}

// checkPeerDiscovery checks that a cluster node mounts a configuration
// file into conf.d that clusters it with nodes by classic config peer
// discovery.
func checkPeerDiscovery(t *testing.T, s *stack, name string, nodes []string) {
	t.Helper()
	var files []string
	for _, v := range s.project.Services[name].Volumes {
		if strings.HasPrefix(v.Target, "/etc/rabbitmq/conf.d/") {
			files = append(files, v.Source)
		}
	}
	if len(files) == 0 {
		t.Errorf("node %s mounts no configuration into /etc/rabbitmq/conf.d: nothing tells it its peers", name)
		return
	}
	settings := map[string]string{}
	var listed []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("node %s: %v", name, err)
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Errorf("node %s: %s: %q is no key = value line", name, f, line)
				continue
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			settings[k] = v
			if strings.HasPrefix(k, "cluster_formation.classic_config.nodes.") {
				listed = append(listed, v)
			}
		}
	}
	switch b := settings["cluster_formation.peer_discovery_backend"]; b {
	case "classic_config", "rabbit_peer_discovery_classic_config":
	default:
		t.Errorf("node %s: cluster_formation.peer_discovery_backend = %q, want classic_config", name, b)
	}
	slices.Sort(listed)
	if !slices.Equal(listed, nodes) {
		t.Errorf("node %s: classic config peer discovery lists %q, want the cluster's nodes %q", name, listed, nodes)
	}
}

// brokerSettings are a relay service's broker settings, as it parses
// them at start.
type brokerSettings struct {
	QueueType, DelayBackend, MetricsAddr string
	AMQPURLs                             []string
}

// loadBroker parses a pipeline service's environment with the service's
// own LoadConfig, topology check included.
func loadBroker(command string, getenv func(string) string) (brokerSettings, error) {
	switch {
	case command == "api":
		c, err := api.LoadConfig(getenv)
		return brokerSettings{c.QueueType, c.DelayBackend, c.MetricsAddr, c.AMQPURLs}, err
	case command == "retrier":
		c, err := retrier.LoadConfig(getenv)
		return brokerSettings{c.QueueType, c.DelayBackend, c.MetricsAddr, c.AMQPURLs}, err
	case strings.HasPrefix(command, "worker "):
		c, err := worker.LoadConfig(getenv)
		return brokerSettings{c.QueueType, c.DelayBackend, c.MetricsAddr, c.AMQPURLs}, err
	}
	return brokerSettings{}, fmt.Errorf("relay %s is not a pipeline service", command)
}

// setting is the value a worker reads for key: the service's environment,
// else the default its configuration declares.
func (s *stack) setting(t *testing.T, service, key string) string {
	t.Helper()
	if v := s.getenv(service)(key); v != "" {
		return v
	}
	cmd := s.command(service)
	cfgs, err := worker.Env(strings.TrimPrefix(cmd, "worker "))
	if err != nil {
		t.Fatalf("service %s: %v", service, err)
	}
	for _, cfg := range cfgs {
		params, err := env.GetFieldParams(cfg)
		if err != nil {
			t.Fatalf("env tags of %T: %v", cfg, err)
		}
		for _, p := range params {
			if p.Key == key {
				return p.DefaultValue
			}
		}
	}
	t.Fatalf("relay %s reads no %s", cmd, key)
	return ""
}

// checkHealth checks that every long-running relay service has a health
// check that runs relay health (the image has no shell) against a port
// the service listens on: the API's /readyz, the others' /healthz. And
// that whatever depends on a service with a health check waits for it to
// be healthy, not merely started.
func checkHealth(t *testing.T, s *stack) {
	for name, cmd := range s.commands {
		if cmd == "send" {
			continue // a client that posts and exits; nothing waits for it
		}
		hc := s.project.Services[name].HealthCheck
		if hc == nil || hc.Disable || len(hc.Test) == 0 {
			t.Errorf("service %s (relay %s) has no health check: a jammed process shows Up", name, cmd)
			continue
		}
		test := []string(hc.Test)
		if len(test) != 4 || test[0] != "CMD" || test[1] != "/relay" || test[2] != "health" {
			t.Errorf("service %s: health check %q, want [CMD /relay health URL] (the image has no shell)", name, test)
			continue
		}
		u, err := url.Parse(test[3])
		if err != nil || u.Hostname() != "127.0.0.1" {
			t.Errorf("service %s: health check URL %q, want http://127.0.0.1:PORT/…", name, test[3])
			continue
		}
		if p, _ := strconv.Atoi(u.Port()); !slices.Contains(s.listens(t, name), p) {
			t.Errorf("service %s: health check asks port %s, but the service listens on %v", name, u.Port(), s.listens(t, name))
		}
		want := "/healthz"
		if cmd == "api" {
			want = "/readyz" // broker connected and history writing
		}
		if u.Path != want {
			t.Errorf("service %s: health check asks %s, want %s", name, u.Path, want)
		}
	}
	for name, svc := range s.project.Services {
		for dep, d := range svc.DependsOn {
			hc := s.project.Services[dep].HealthCheck
			if hc == nil || hc.Disable {
				continue
			}
			if d.Condition != types.ServiceConditionHealthy {
				t.Errorf("service %s: depends_on %s condition %q, want %q: %s has a health check", name, dep, d.Condition, types.ServiceConditionHealthy, dep)
			}
		}
	}
}

// checkTmp checks that every service with a read-only root has a writable
// /tmp: SQLite, the history store, spills to a temporary file, and without
// one the history stops at the first large batch.
func checkTmp(t *testing.T, s *stack) {
	for name, svc := range s.project.Services {
		if !svc.ReadOnly {
			continue
		}
		ok := slices.ContainsFunc(svc.Tmpfs, func(m string) bool { return strings.Split(m, ":")[0] == "/tmp" })
		for _, v := range svc.Volumes {
			ok = ok || (v.Target == "/tmp" && !v.ReadOnly)
		}
		if !ok {
			t.Errorf("service %s: read_only with no writable /tmp (tmpfs: [/tmp])", name)
		}
	}
}

// loopbackPort is a published port as the compose file must write it.
var loopbackPort = regexp.MustCompile(`^127\.0\.0\.1:\$\{([A-Z][A-Z0-9_]*):-[0-9]+\}:[0-9]+$`)

// checkLoopback checks that every published port is bound to 127.0.0.1
// (the public dashboard and the management UI's guest/guest must not face
// the network) on a host port a variable can change, read from the file
// as written, before compose fills the variables in.
func checkLoopback(t *testing.T, s *stack) {
	for name, svc := range s.project.Services {
		for _, p := range svc.Ports {
			if p.Published != "" && p.HostIP != "127.0.0.1" {
				t.Errorf("service %s: publishes %s on %q, want 127.0.0.1", name, p.Published, p.HostIP)
			}
		}
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot, composeFile))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Services map[string]struct {
			Ports []string `yaml:"ports"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for name, svc := range file.Services {
		for _, p := range svc.Ports {
			m := loopbackPort.FindStringSubmatch(p)
			if m == nil {
				t.Errorf("service %s: port %q, want 127.0.0.1:${VARIABLE:-port}:port", name, p)
				continue
			}
			v := m[1]
			if other, dup := vars[v]; dup {
				t.Errorf("services %s and %s share the port variable %s", other, name, v)
			}
			vars[v] = name
		}
	}
}

// checkBrokerVolumes checks that every broker node keeps its data on a
// named volume: docker compose down and up must keep the queues, the
// waiting retries and the dead-letter queue the history speaks of.
func checkBrokerVolumes(t *testing.T, s *stack) {
	nodes := append([]string{s.broker(t)}, s.clusterNodes()...)
	seen := map[string]string{}
	for _, name := range nodes {
		var vol string
		for _, v := range s.project.Services[name].Volumes {
			if v.Target == "/var/lib/rabbitmq" && v.Type == types.VolumeTypeVolume {
				vol = v.Source
			}
		}
		if vol == "" {
			t.Errorf("broker %s: no named volume on /var/lib/rabbitmq: down + up loses its queues", name)
			continue
		}
		if _, ok := s.project.Volumes[vol]; !ok {
			t.Errorf("broker %s: volume %s is not declared under volumes", name, vol)
		}
		if other, dup := seen[vol]; dup {
			t.Errorf("brokers %s and %s share the volume %s", other, name, vol)
		}
		seen[vol] = name
	}
}

// checkPullPolicy checks that no service running the relay image tries a
// registry for it: relay:local is built here.
func checkPullPolicy(t *testing.T, s *stack) {
	for name, svc := range s.project.Services {
		if svc.Image != s.relay {
			continue
		}
		want := types.PullPolicyNever
		if svc.Build != nil {
			want = types.PullPolicyBuild
		}
		if svc.PullPolicy != want {
			t.Errorf("service %s: pull_policy %q, want %q: %s is in no registry", name, svc.PullPolicy, want, s.relay)
		}
	}
}
