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
api=http://localhost:${HTTP_ADDR##*:}

bin/relay all > demo.log 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT INT TERM

for _ in $(seq 1 100); do
  if curl -fs "$api/readyz" >/dev/null 2>&1; then break; fi
  if ! kill -0 $pid 2>/dev/null; then echo "relay all exited; see demo.log:"; tail -5 demo.log; exit 1; fi
  sleep 0.2
done
curl -fs "$api/readyz" >/dev/null || { echo "relay all did not become ready; see demo.log"; exit 1; }

echo "relay is up (logs in demo.log). Dashboard: $api/   Token: $API_TOKENS"
echo "Sending ${DEMO_N:-10} notifications with the schedule $RETRY_DELAYS and ${FLAKY_RATE} transient failures:"
# Errors are cut to fit the terminal; 100 columns when it is not one.
width=100
if [ -t 1 ]; then width=$(tput cols 2>/dev/null || echo 100); fi
[ "$width" -ge 40 ] 2>/dev/null || width=100
bin/relay send --api "$api" --token "$API_TOKENS" --n "${DEMO_N:-10}" --watch --timeout 2m --width "$width"
echo
echo "Open $api/ to watch more; send more with:"
echo "  bin/relay send --api $api --token $API_TOKENS --n 20"
echo "Follow one notification's attempts with:"
echo "  bin/relay status --api $api --token $API_TOKENS <id>"
echo "Ctrl-C stops the demo."
wait $pid
