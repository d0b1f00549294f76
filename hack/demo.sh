#!/usr/bin/env bash
# The demo: a private containerd, the cri-prober agent with the Pod
# manifests of examples/demo, and three pods created the way a CI harness
# creates them (crictl and examples/crictl/*.json):
#   web    readiness flips off and on; a liveness failure restarts it
#   slow   starts slowly; its startup probe holds the other probes back
#   flaky  turns unhealthy by itself and is restarted, with back-off
# On a terminal it then shows a live view until Ctrl-C, which removes
# everything; otherwise it leaves it all running (`make demo-down` removes it).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { echo "\$ $*"; "$@"; }
# wait_for TIMEOUT_S WHAT CMD…: poll CMD every 0.2 s until it succeeds.
wait_for() {
  local timeout=$1 what=$2
  shift 2
  for _ in $(seq 1 $((timeout * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "timed out after ${timeout}s waiting for: $what"
}

step "Starting a private containerd (everything under $CRI_PROBER_DIR)"
hack/containerd-up.sh
crictl=$(hack/crictl.sh)
prober=bin/cri-prober
api=http://127.0.0.1:9440

# A previous demo's agent and pods go first.
stop_agent
for old in $("$crictl" pods --namespace demo -q 2>/dev/null); do
  "$crictl" stopp "$old" >/dev/null && "$crictl" rmp "$old" >/dev/null
done

step "Checking the demo's manifests, then starting the agent (log: $AGENT_LOG)"
run "$prober" validate examples/demo
echo "\$ cri-prober run --pod-manifests examples/demo --listen 127.0.0.1:9440 &"
setsid "$prober" run --pod-manifests examples/demo --listen 127.0.0.1:9440 >"$AGENT_LOG" 2>&1 </dev/null &
echo $! >"$AGENT_PID"
wait_for 10 "the agent's API" /usr/bin/busybox wget -q -O /dev/null "$api/healthz"

step "Creating pods demo/web, demo/slow and demo/flaky with crictl, as a CI harness would"
declare -A sandbox
for pod in web slow flaky; do
  ctr_json=examples/crictl/$pod-app.json
  [[ $pod == web ]] && ctr_json=examples/crictl/web-target.json
  echo "\$ crictl runp examples/crictl/$pod-pod.json && crictl create … $ctr_json … && crictl start …"
  sandbox[$pod]=$("$crictl" runp "examples/crictl/$pod-pod.json")
  ctr=$("$crictl" create "${sandbox[$pod]}" "$ctr_json" "examples/crictl/$pod-pod.json")
  "$crictl" start "$ctr" >/dev/null
done
web=$("$crictl" ps -q --name web --pod "${sandbox[web]}")

ready() { /usr/bin/busybox wget -q -O /dev/null "$api/api/v1/pods/demo/$1/ready"; }
not_ready() { ! ready "$1"; }
wait_for 20 "demo/web ready" ready web
step "The agent probes them: web is ready, slow is still starting (its startup probe fails until it listens)"
run "$prober" status --namespace demo

step "Readiness flips: web's app reports not ready (its /ready answers 503), then ready again"
run "$crictl" exec "$web" touch /tmp/not-ready
wait_for 10 "demo/web not ready" not_ready web
echo "\$ wget -S $api/api/v1/pods/demo/web/ready"
/usr/bin/busybox wget -S -q -O /dev/null "$api/api/v1/pods/demo/web/ready" 2>&1 | head -1 || true
run "$crictl" exec "$web" rm /tmp/not-ready
wait_for 10 "demo/web ready again" ready web
echo "ready again"

step "A liveness failure: web's /healthz answers 500; after 2 failures it is restarted"
run "$crictl" exec "$web" touch /tmp/unhealthy
restarted() { "$prober" status -o json --namespace demo | tr -d ' \n' | grep -q "\"name\":\"$1\"[^]]*\"restartCount\":$2"; }
wait_for 20 "web's restart" restarted web 1
wait_for 20 "slow ready" ready slow
run "$prober" status --namespace demo

if [[ -t 0 && -t 1 ]]; then
  trap 'echo; echo "Removing everything…"; hack/containerd-down.sh; exit 0' INT
  echo
  echo "The status page, live in a browser: $api/"
  read -r -p "Press Enter for the live view (flaky turns unhealthy every 20 s and backs off); Ctrl-C removes everything. " _
  while true; do
    clear
    echo "cri-prober demo — live (Ctrl-C removes everything)      $(date +%T)"
    echo "status page: $api/"
    echo
    "$prober" status --namespace demo || true
    echo
    "$prober" events --since 2m | tail -12 || true
    sleep 2
  done
fi

step "flaky turns unhealthy after 20 s of running: restarted by itself"
wait_for 60 "flaky's first restart" restarted app 1
run "$prober" status --namespace demo
run "$prober" events --since 5m

cat <<MSG

Done. containerd and the agent are still running (flaky keeps failing and
backing off), so you can explore:
  open $api/ in a browser   # the status page: pods, probes' runs, restarts and why, events; live
  export CONTAINER_RUNTIME_ENDPOINT=$CONTAINER_RUNTIME_ENDPOINT
  $prober status                  # pods, readiness, restarts, last probe results
  $prober events -f               # follow events
  $prober why demo/web            # why each restart happened: the failures, the grace period, the back-off
  $prober history demo/flaky      # each probe's last runs and, kept apart, its last failures
  $prober explain -f examples/demo/pods.yaml
  curl $api/api/v1/pods   $api/metrics/probes
Remove everything with: make demo-down
MSG
