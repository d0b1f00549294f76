#!/usr/bin/env bash
# The demo: a private containerd, the cri-prober agent with a Pod manifest,
# and a pod created the way a CI harness does it (crictl and the JSON configs
# in examples/crictl). Then, live: readiness flips off and on, and a liveness
# failure restarts the container. Everything is left running to explore;
# `make demo-down` stops and removes it all.
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

# A previous demo's agent and pod go first.
stop_agent
for old in $("$crictl" pods --namespace demo -q 2>/dev/null); do
  "$crictl" stopp "$old" >/dev/null && "$crictl" rmp "$old" >/dev/null
done

step "Starting the agent with the demo's manifest (log: $AGENT_LOG)"
echo "\$ cri-prober run --pod-manifests examples/demo --listen 127.0.0.1:9440 &"
setsid "$prober" run --pod-manifests examples/demo --listen 127.0.0.1:9440 >"$AGENT_LOG" 2>&1 </dev/null &
echo $! >"$AGENT_PID"
wait_for 10 "the agent's API" /usr/bin/busybox wget -q -O /dev/null "$api/healthz"

step "Creating pod demo/web with crictl, as a CI harness would"
echo "\$ crictl runp examples/crictl/web-pod.json && crictl create … && crictl start …"
pod=$("$crictl" runp examples/crictl/web-pod.json)
web=$("$crictl" create "$pod" examples/crictl/web-target.json examples/crictl/web-pod.json)
"$crictl" start "$web" >/dev/null
run "$prober" pods --namespace demo

ready() { /usr/bin/busybox wget -q -O /dev/null "$api/api/v1/pods/demo/web/ready"; }
not_ready() { ! ready; }
wait_for 20 "demo/web ready" ready
step "The agent probes it: ready (the load-balancer endpoint answers 200)"
run "$prober" status --namespace demo
echo "\$ wget -qO- $api/api/v1/pods/demo/web/ready"
/usr/bin/busybox wget -q -O- "$api/api/v1/pods/demo/web/ready"

step "Readiness flips: the app reports not ready (its /ready answers 503)"
run "$crictl" exec "$web" touch /tmp/not-ready
wait_for 10 "demo/web not ready" not_ready
run "$prober" status --namespace demo
echo "\$ wget -S $api/api/v1/pods/demo/web/ready"
/usr/bin/busybox wget -S -q -O /dev/null "$api/api/v1/pods/demo/web/ready" 2>&1 | head -1 || true
run "$crictl" exec "$web" rm /tmp/not-ready
wait_for 10 "demo/web ready again" ready
echo "ready again"

step "A liveness failure: the app's /healthz answers 500; after 2 failures the container is restarted"
run "$crictl" exec "$web" touch /tmp/unhealthy
restarted() { "$prober" status -o json --namespace demo | grep -q '"restartCount": 1'; }
wait_for 20 "the restart" restarted
wait_for 10 "demo/web ready after the restart" ready
run "$prober" status --namespace demo
run "$prober" events
run "$crictl" ps -a --pod "$pod"

cat <<MSG

Done. containerd and the agent are still running, so you can explore:
  export CONTAINER_RUNTIME_ENDPOINT=$CONTAINER_RUNTIME_ENDPOINT
  $prober status                      # pods, readiness, restarts, last probe results
  $prober events -f                   # follow events
  $crictl exec \$($crictl ps -q --name web --pod $pod) touch /tmp/unhealthy   # make it fail again
  curl $api/api/v1/pods   $api/metrics/probes
Remove everything with: make demo-down
MSG
