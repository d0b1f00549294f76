#!/usr/bin/env bash
# The demo: a private containerd and the cri-prober agent making the pods of
# examples/demo/pods.yaml alone (a copy of it, root's, under
# $CRI_PROBER_DIR/demo-pods), as kubelet makes static pods:
#   web    an init container, postStart; readiness flips off and on; a
#          liveness failure restarts it
#   slow   a sidecar whose startup probe holds the app back; the app starts
#          slowly and its startup probe holds its other probes back
#   flaky  turns unhealthy by itself and is restarted, with back-off
# and one pod made with crictl, as a CI harness makes it (attach mode: the
# agent probes and restarts what someone else made):
#   ci     examples/crictl/ci-*.json, its probes in CRI annotations
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

# The agent reads a manifest directory only when it is root's (or its own
# uid's) and no one else may write in it: a manifest starts any container.
# The repository may be the user's who cloned it, so the demo's pods are a
# copy of examples/demo, root's, under $CRI_PROBER_DIR.
pods_dir="$CRI_PROBER_DIR/demo-pods"
step "Checking the demo's manifests (copied to $pods_dir), then starting the agent (log: $AGENT_LOG)"
rm -rf "$pods_dir"
install -d -m 0755 "$pods_dir"
install -m 0644 examples/demo/pods.yaml "$pods_dir/pods.yaml"
run "$prober" validate --static "$pods_dir"
node_flags=(--hostname-override demo --root-dir "$CRI_PROBER_DIR/agent-root" --pod-logs-dir "$CRI_PROBER_DIR/pod-logs"
  --container-log-link-dir "$CRI_PROBER_DIR/containers")
echo "\$ cri-prober run --static-pod-path $pods_dir ${node_flags[*]} --listen 127.0.0.1:9440 &"
setsid "$prober" run --static-pod-path "$pods_dir" "${node_flags[@]}" --listen 127.0.0.1:9440 >"$AGENT_LOG" 2>&1 </dev/null &
echo $! >"$AGENT_PID"
wait_for 10 "the agent's API" /usr/bin/busybox wget -q -O /dev/null "$api/healthz"

ready() { /usr/bin/busybox wget -q -O /dev/null "$api/api/v1/pods/demo/$1/ready"; }
not_ready() { ! ready "$1"; }
wait_for 30 "demo/web-demo ready" ready web-demo
step "The agent made the pods of pods.yaml alone (named <name>-<node>): web is ready, slow is still starting"
run "$prober" status --namespace demo
run "$crictl" pods --namespace demo

step "A pod made with crictl, as a CI harness makes it: the agent probes it from its annotations"
echo "\$ crictl runp examples/crictl/ci-pod.json && crictl create … examples/crictl/ci-app.json … && crictl start …"
ci=$("$crictl" runp examples/crictl/ci-pod.json)
ctr=$("$crictl" create "$ci" examples/crictl/ci-app.json examples/crictl/ci-pod.json)
"$crictl" start "$ctr" >/dev/null
wait_for 20 "demo/ci ready" ready ci

web=$("$crictl" ps -q --name '^web$' --pod "$("$crictl" pods -q --name web-demo --namespace demo)")
step "Readiness flips: web's app reports not ready (its /ready answers 503), then ready again"
run "$crictl" exec "$web" touch /tmp/not-ready
wait_for 10 "demo/web-demo not ready" not_ready web-demo
echo "\$ wget -S $api/api/v1/pods/demo/web-demo/ready"
/usr/bin/busybox wget -S -q -O /dev/null "$api/api/v1/pods/demo/web-demo/ready" 2>&1 | head -1 || true
run "$crictl" exec "$web" rm /tmp/not-ready
wait_for 10 "demo/web-demo ready again" ready web-demo
echo "ready again"

step "A liveness failure: web's /healthz answers 500; after 2 failures it is restarted (preStop, grace period, then postStart)"
run "$crictl" exec "$web" touch /tmp/unhealthy
# restarted POD: some container of demo/POD has restarted.
restarted() { /usr/bin/busybox wget -q -O - "$api/api/v1/pods/demo/$1" | tr -d ' \n' | grep -q '"restartCount":[1-9]'; }
wait_for 30 "web's restart" restarted web-demo
wait_for 30 "slow ready" ready slow-demo
run "$prober" status --namespace demo
run "$prober" logs demo/web-demo -c web --tail 3

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
wait_for 60 "flaky's first restart" restarted flaky-demo
run "$prober" status --namespace demo
run "$prober" events --since 5m

cat <<MSG

Done. containerd and the agent are still running (flaky keeps failing and
backing off), so you can explore:
  open $api/ in a browser   # the status page: pods, probes' runs, restarts and why, events; live
  export CONTAINER_RUNTIME_ENDPOINT=$CONTAINER_RUNTIME_ENDPOINT
  $prober status                  # pods, readiness, restarts, last probe results
  $prober events -f               # follow events
  $prober why demo/web-demo       # why each restart happened: the failures, the grace period, the back-off
  $prober history demo/flaky-demo # each probe's last runs and, kept apart, its last failures
  $prober logs demo/slow-demo -c app
  $prober explain -f $pods_dir/pods.yaml
  curl $api/api/v1/pods   $api/metrics/probes
Edit $pods_dir/pods.yaml (the agent's copy of
examples/demo/pods.yaml) and the agent makes the edited pods anew, as
kubelet does with static pods. Remove everything with: make demo-down
MSG
