#!/usr/bin/env bash
# The demo: a private containerd, a pod created the way a CI harness does it
# (crictl and JSON configs from examples/crictl), and what cri-prober sees,
# including a container exiting live. Leaves containerd running so you can
# explore; `make demo-down` removes everything.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Starting a private containerd (everything under $CRI_PROBER_DIR)"
hack/containerd-up.sh
crictl=$(hack/crictl.sh)
prober=bin/cri-prober
examples=examples/crictl

# A previous demo's pod would make a second one with the same name fail.
for old in $("$crictl" pods --namespace demo -q 2>/dev/null); do
  "$crictl" stopp "$old" >/dev/null && "$crictl" rmp "$old" >/dev/null
done

step "Creating pod demo/web with crictl, as a CI harness would"
echo "\$ crictl runp $examples/web-pod.json && crictl create … && crictl start …"
pod=$("$crictl" runp "$examples/web-pod.json")
httpd=$("$crictl" create "$pod" "$examples/web-httpd.json" "$examples/web-pod.json")
"$crictl" start "$httpd" >/dev/null

step "What cri-prober sees"
echo "\$ cri-prober pods"
"$prober" pods

ip=$("$crictl" inspectp -o go-template --template '{{.status.network.ip}}' "$pod")
step "The pod IP answers from the host, as probes will reach it"
echo "\$ wget -qO- http://$ip:8080/"
for _ in $(seq 1 50); do
  /usr/bin/busybox wget -qO- "http://$ip:8080/" 2>/dev/null && break
  sleep 0.1
done

step "Watching live: a worker container starts, fails after 2 s, and cri-prober sees the exit at once"
echo "\$ cri-prober pods --namespace demo --watch"
out=$(mktemp)
"$prober" pods --namespace demo --watch 2>/dev/null > >(tee "$out") &
watch=$!
trap 'kill $watch 2>/dev/null || true; rm -f "$out"' EXIT
worker=$("$crictl" create "$pod" "$examples/web-worker.json" "$examples/web-pod.json")
"$crictl" start "$worker" >/dev/null
for _ in $(seq 1 100); do
  grep -q ContainerExited "$out" && break
  sleep 0.1
done
kill "$watch" 2>/dev/null || true
wait "$watch" 2>/dev/null || true

cat <<MSG

Done. containerd is still running, so you can explore:
  export CONTAINER_RUNTIME_ENDPOINT=$CONTAINER_RUNTIME_ENDPOINT
  $prober pods -o json
  $crictl ps -a
  $crictl inspect $worker
Remove everything with: make demo-down
MSG
