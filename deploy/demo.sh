#!/usr/bin/env bash
# make demo: relay all against the local broker with a short schedule and
# flaky downstreams, a burst of notifications followed to the end, then
# the services keep running for the dashboard until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

export AMQP_URL=${AMQP_URL:-amqp://guest:guest@localhost:5672/}
export API_TOKENS=${API_TOKENS:-demo-token-change-me-0001}
export RETRY_DELAYS=${RETRY_DELAYS:-1s,2s,4s,8s}
export FLAKY_EMAIL_SCENARIO=${FLAKY_EMAIL_SCENARIO:-flaky}
export FLAKY_WEBHOOK_SCENARIO=${FLAKY_WEBHOOK_SCENARIO:-flaky}
export FLAKY_RATE=${FLAKY_RATE:-0.5}
export HTTP_ADDR=${HTTP_ADDR:-:8080}
# The email worker's two mail servers (docs/providers.md): relay all's
# flaky one, then a backup in a process of its own that takes
# FLAKY_BACKUP_LIMIT (5) emails a second and answers the rest 421. relay
# keeps under it (SMTP_2_RATE=4); FLAKY_EMAIL_SCENARIO=outage takes the
# first down for 10 s and shows the failover.
backup_smtp=${FLAKY_BACKUP_SMTP_ADDR:-127.0.0.1:2526}
backup_http=${FLAKY_BACKUP_HTTP_ADDR:-127.0.0.1:9092}
primary_smtp=${FLAKY_SMTP_ADDR:-:2525}
primary_http=${FLAKY_HTTP_ADDR:-:9090}
# relay send's webhooks go to relay all's receiver, wherever it listens.
export DEMO_WEBHOOK_URL=${DEMO_WEBHOOK_URL:-http://127.0.0.1:${primary_http##*:}/webhooks/demo}
export SMTP_PROVIDERS=${SMTP_PROVIDERS:-2}
export SMTP_1_NAME=${SMTP_1_NAME:-flaky} SMTP_1_HOST=${SMTP_1_HOST:-127.0.0.1} SMTP_1_PORT=${SMTP_1_PORT:-${primary_smtp##*:}}
export SMTP_2_NAME=${SMTP_2_NAME:-backup} SMTP_2_HOST=${SMTP_2_HOST:-127.0.0.1} SMTP_2_PORT=${SMTP_2_PORT:-${backup_smtp##*:}}
export SMTP_2_RATE=${SMTP_2_RATE:-4} SMTP_2_BURST=${SMTP_2_BURST:-2} SMTP_BREAKER_FAILURES=${SMTP_BREAKER_FAILURES:-3}
relay=${RELAY_BIN:-bin/relay}
logfile=${DEMO_LOG:-demo.log}
port=${HTTP_ADDR##*:}
api=http://localhost:$port

# listening reports whether something accepts connections on host:port.
listening() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# The broker: AMQP_URL's host and port (5672 unless it names one).
hostport=${AMQP_URL#*://}
hostport=${hostport#*@}
hostport=${hostport%%/*}
broker_host=${hostport%%:*}
broker_port=5672
[ "$hostport" != "$broker_host" ] && broker_port=${hostport##*:}
[ "$broker_host" = localhost ] && broker_host=127.0.0.1
if ! listening "$broker_host" "$broker_port"; then
  if [ "$broker_host" = 127.0.0.1 ] && [ "$broker_port" != 5672 ]; then
    # The local rabbitmq-server listens on 5672: started for another port,
    # a mistyped one say, it would not answer there.
    echo "no RabbitMQ broker on $broker_host:$broker_port, the port AMQP_URL names ($AMQP_URL)."
    if listening 127.0.0.1 5672; then
      echo "One listens on the default port 5672: AMQP_URL=amqp://guest:guest@localhost:5672/ make demo"
    fi
    echo "Start your broker on $broker_port, or set AMQP_URL to one that runs (amqp://user:password@host:port/). make demo starts the local rabbitmq-server only for the default port, 5672."
    exit 1
  elif [ "$broker_host" = 127.0.0.1 ] && command -v rabbitmq-server >/dev/null 2>&1; then
    echo "no broker on $broker_host:$broker_port: starting the local rabbitmq-server"
    rabbitmq-server -detached >/dev/null 2>&1 || true
    for _ in $(seq 1 90); do
      listening "$broker_host" "$broker_port" && break
      sleep 1
    done
    listening "$broker_host" "$broker_port" || { echo "rabbitmq-server did not come up on $broker_host:$broker_port; see its logs under /var/log/rabbitmq"; exit 1; }
  else
    echo "no RabbitMQ broker on $broker_host:$broker_port: install your distribution's rabbitmq-server package (apt install rabbitmq-server), set AMQP_URL to a broker, or run the whole demo in containers with docker compose up"
    exit 1
  fi
fi

# The ports relay listens on must be free: otherwise another program
# answers in relay's place and the demo fails with puzzling 401s (the
# API's) or undelivered copies (the fake downstreams').
if listening 127.0.0.1 "$port"; then
  echo "port $port is taken by another program: stop it, or choose another port with HTTP_ADDR=:8081 make demo"
  exit 1
fi
for addr in "$primary_http" "$primary_smtp"; do
  if listening 127.0.0.1 "${addr##*:}"; then
    echo "port ${addr##*:} is taken by another program: stop it, or move relay's fake downstreams with FLAKY_HTTP_ADDR=:9190 FLAKY_SMTP_ADDR=:2625 make demo"
    exit 1
  fi
done

for addr in "$backup_smtp" "$backup_http"; do
  if listening 127.0.0.1 "${addr##*:}"; then
    echo "port ${addr##*:} is taken by another program: stop it, or move the backup mail server with FLAKY_BACKUP_SMTP_ADDR=127.0.0.1:2527 FLAKY_BACKUP_HTTP_ADDR=127.0.0.1:9093 make demo"
    exit 1
  fi
done

FLAKY_SMTP_ADDR=$backup_smtp FLAKY_HTTP_ADDR=$backup_http FLAKY_EMAIL_SCENARIO=${FLAKY_BACKUP_EMAIL_SCENARIO:-throttled} \
  FLAKY_LIMIT=${FLAKY_BACKUP_LIMIT:-5} "$relay" flaky > "$logfile.backup" 2>&1 &
backup=$!
"$relay" all > "$logfile" 2>&1 &
pid=$!
# stop ends relay and the backup mail server and waits for them. Ctrl-C
# or a SIGTERM is how the demo is meant to end, so it ends with status 0
# (make would report any other as an error); the status of relay's own
# graceful stop does not change that.
stop() {
  kill $pid $backup 2>/dev/null || true
  wait $pid $backup 2>/dev/null || true
}
trap stop EXIT
trap 'stop; exit 0' INT TERM

# Ready means relay's own API answers: it logged that it listens (the API,
# not the flaky downstreams, which start first), and /readyz says it has
# the broker.
listening_line='"msg":"listening","service":"api"'
for _ in $(seq 1 150); do
  if grep -q "$listening_line" "$logfile" && curl -fs "$api/readyz" >/dev/null 2>&1; then break; fi
  if ! kill -0 $pid 2>/dev/null; then echo "relay all exited; the end of $logfile:"; tail -5 "$logfile"; exit 1; fi
  sleep 0.2
done
if ! grep -q "$listening_line" "$logfile" || ! curl -fs "$api/readyz" >/dev/null; then
  echo "relay all did not become ready in 30s; the end of $logfile:"
  tail -5 "$logfile"
  exit 1
fi

echo "relay is up (logs in $logfile). Dashboard: $api/   Token: $API_TOKENS"
# What relay warned of at start, a misspelled variable say, is worth
# seeing before the burst.
grep '^relay: warning: ' "$logfile" || true
down=${DEMO_DOWN:-1}
echo "Sending ${DEMO_N:-10} notifications with the schedule $RETRY_DELAYS and ${FLAKY_RATE} transient failures;"
if [ "$down" = 1 ]; then
	echo "the webhook of the last one goes to an endpoint that is always down, retried through the whole schedule and parked:"
else
	echo "the webhooks of the last $down go to an endpoint that is always down, each retried through the whole schedule and parked:"
fi
# Errors are cut to fit the terminal, and printed whole when the output
# is not one (a file, a pipe).
fit=(--full)
if [ -t 1 ]; then
  width=$(tput cols 2>/dev/null || echo 100)
  [ "$width" -ge 20 ] 2>/dev/null || width=100
  fit=(--width "$width")
fi
"$relay" send --api "$api" --token "$API_TOKENS" --n "${DEMO_N:-10}" --down "$down" --watch --timeout 2m "${fit[@]}"
echo
echo "Open $api/ to watch more; send more with:"
echo "  $relay send --api $api --token $API_TOKENS --n 20"
echo "Follow one notification's attempts with:"
echo "  $relay status --api $api --token $API_TOKENS <id>"
echo "Log a browser in by a one-time link, without typing the token (--id <id> opens one notification):"
echo "  $relay dashboard --api $api --token $API_TOKENS"
echo "The backup mail server's stats: http://$backup_http/stats (logs in $logfile.backup)."
echo "Ctrl-C stops the demo."
wait $pid
