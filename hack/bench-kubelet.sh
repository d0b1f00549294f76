#!/usr/bin/env bash
# make bench-kubelet (issue 15): the same 10 steady pods probed by a real
# kubelet, then by cri-prober, on one private containerd, in one run; writes
# the rows into docs/performance.md between the kubelet markers only.
#
# hack/bench-kubelet.sh startup (make bench-startup, issue 20): how long
# 1 and 30 pods take from their manifests written into a static pod
# directory to their containers running and to the pods Ready (readiness
# probe every 1 s): under kubelet, under `cri-prober run --static-pod-path`
# and, as the floor, the same sandboxes and containers made directly
# through CRI, all at once (Ready: the server's first answer). Writes
# docs/performance.md between the startup markers. BENCH_STARTUP_RUNS (3),
# BENCH_STARTUP_SIZES ("1 30").
#
# Each of BENCH_KUBELET_RUNS runs (default 3):
#   1. kubelet (hack/kubelet/build.sh: built once from the Go module proxy)
#      runs standalone with the 10 Pods as static pods; once all are ready
#      and settled, its CPU and RSS are measured over the window;
#   2. kubelet is stopped and its pods removed; the same pods are made with
#      crictl (each container in its own PID namespace, as kubelet makes
#      them) and `bin/cri-prober run --pod-manifests` gets the same Pod YAML;
#      once all are ready and settled, the agent is measured the same way.
# Everything it starts (containerd, kubelet, the agent, the pods) is stopped
# by PID and cleaned up on exit, whatever happens. Needs root. Takes about
# 3 minutes per run, plus the kubelet build the first time.
#
# Env: BENCH_KUBELET_RUNS (3), BENCH_KUBELET_SETTLE (20s),
# BENCH_KUBELET_WINDOW (60s), BENCH_KUBELET_V (kubelet's -v, 0),
# K8S_VERSION (v1.36.3), BENCH_KUBELET_DIR (/var/tmp/cri-prober-kubelet),
# BENCH_KUBELET_MD (docs/performance.md).
set -euo pipefail

# A containerd, bridge and subnet of its own: make test-e2e and the demo
# (hack/lib.sh's defaults) can run beside it.
CRI_PROBER_DIR=${BENCH_KUBELET_DIR:-/var/tmp/cri-prober-kubelet}
CNI_BRIDGE=${BENCH_KUBELET_BRIDGE:-cpkube0}
CNI_SUBNET=${BENCH_KUBELET_SUBNET:-10.88.232.0/24}
export CRI_PROBER_DIR CNI_BRIDGE CNI_SUBNET
source "$(dirname "$0")/lib.sh"
export IMAGE_SERVICE_ENDPOINT=$CONTAINER_RUNTIME_ENDPOINT

RUNS=${BENCH_KUBELET_RUNS:-3}
SETTLE=${BENCH_KUBELET_SETTLE:-20s}
WINDOW=${BENCH_KUBELET_WINDOW:-60s}
KUBELET_V=${BENCH_KUBELET_V:-0}
K8S_VERSION=${K8S_VERSION:-v1.36.3}
KUBELET_BIN=${KUBELET_BIN:-$CACHE_DIR/kubelet-$K8S_VERSION} # hack/kubelet/build.sh builds it there
export K8S_VERSION KUBELET_BIN
MD=${BENCH_KUBELET_MD:-$REPO_ROOT/docs/performance.md}
PODS=10
IMAGE=localhost/busybox:test
NODE=cri-prober-bench # kubelet's --hostname-override: its static pods are <name>-$NODE
KUBELET_PORT=10460 KUBELET_RO_PORT=10465 KUBELET_HEALTHZ_PORT=10468 AGENT_PORT=19449
# kubelet's pods go below a cgroup root of their own, so that another
# kubelet on this machine (/kubepods) is not disturbed and cleanup is ours.
CGROUP_ROOT=cri-prober-bench

B=$CRI_PROBER_DIR/bench-kubelet
KUBELET_ROOT=$B/kubelet   # kubelet's --root-dir (it bind-mounts it onto itself)
KUBELET_PID=$B/kubelet.pid
STATIC=$B/static          # kubelet's staticPodPath
MANIFESTS=$B/pods         # the Pod YAML, for both
CRICTL_CFG=$B/crictl      # the same pods as CRI configs
RESULTS=$B/results
LOGS=$B/logs

[[ $EUID -eq 0 ]] || die "run as root: containerd, kubelet, CNI and cgroups need it"
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "BENCH_KUBELET_RUNS must be a positive number, not $RUNS"
[[ -x $REPO_ROOT/bin/cri-prober ]] || die "bin/cri-prober is missing: run make build (make bench-kubelet does)"

# ---------------------------------------------------------------- helpers

# alive PIDFILE CMD: the PID in PIDFILE is alive and runs CMD (not a reused PID).
alive() {
  local pid
  [[ -f $1 ]] || return 1
  pid=$(cat "$1")
  [[ -n $pid && -r /proc/$pid/cmdline ]] || return 1
  [[ $({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null) == "$2"* ]]
}

# stop_pidfile PIDFILE CMD NAME: SIGTERM, then SIGKILL after 10 s.
stop_pidfile() {
  if alive "$1" "$2"; then
    local pid
    pid=$(cat "$1")
    log "stopping $3 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do alive "$1" "$2" || break; sleep 0.1; done
    if alive "$1" "$2"; then
      log "$3 (pid $pid) still alive after 10 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.5
    fi
  fi
  rm -f "$1"
}

stop_kubelet() { stop_pidfile "$KUBELET_PID" "$KUBELET_BIN" kubelet; }
stop_bench_agent() { stop_pidfile "$AGENT_PID" "$REPO_ROOT/bin/cri-prober run" cri-prober; }

# remove_pods stops and removes every pod of our containerd (all of them
# are ours: it is private), then the pod cgroups kubelet left.
remove_pods() {
  local p
  if containerd_running && [[ -S $CONTAINERD_SOCK ]]; then
    for p in $("$CRICTL" pods -q 2>/dev/null); do
      "$CRICTL" stopp "$p" >/dev/null 2>&1 || true
      "$CRICTL" rmp -f "$p" >/dev/null 2>&1 || true
    done
  fi
  remove_cgroups pods
}

# remove_cgroups pods|all: kubelet's pod cgroups below our root (or all of
# our root, QoS cgroups included). rmdir refuses a cgroup still in use.
remove_cgroups() {
  local d pattern=pod*
  for d in /sys/fs/cgroup/*/"$CGROUP_ROOT"; do
    [[ -d $d ]] || continue
    if [[ $1 == all ]]; then
      find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
    else
      find "$d" -depth -mindepth 2 -type d -path "*/$pattern*" -exec rmdir {} + 2>/dev/null || true
    fi
  done
}

make_cgroups() {
  local d
  for d in /sys/fs/cgroup/*/; do
    case $(stat -f -c %T "$d") in cgroupfs | cgroup2fs) ;; *) continue ;; esac
    mkdir -p "$d$CGROUP_ROOT"
  done
  # a new v1 cpuset has no CPUs or memory nodes until given its parent's
  if [[ -f /sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.cpus ]]; then
    [[ -n $(cat "/sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.cpus") ]] ||
      cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.cpus"
    [[ -n $(cat "/sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.mems") ]] ||
      cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.mems"
  fi
}

# kubelet sets these on start (protectKernelDefaults: false); put them back.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
declare -A SAVED_SYSCTL=()
save_sysctls() {
  local s
  for s in "${SYSCTLS[@]}"; do SAVED_SYSCTL[$s]=$(sysctl -n "$s" 2>/dev/null || true); done
}
restore_sysctls() {
  local s
  for s in "${!SAVED_SYSCTL[@]}"; do
    [[ -n ${SAVED_SYSCTL[$s]} && $(sysctl -n "$s" 2>/dev/null) != "${SAVED_SYSCTL[$s]}" ]] &&
      sysctl -qw "$s=${SAVED_SYSCTL[$s]}" 2>/dev/null || true
  done
}

# wipe_root DIR: unmounts what is mounted below DIR, then removes it.
wipe_root() {
  awk -v d="$1" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$1"
}

# wipe_kubelet_root: kubelet bind-mounts its root dir onto itself.
wipe_kubelet_root() { wipe_root "$KUBELET_ROOT"; }

# kubelet links each container's log into /var/log/containers (a fixed
# path); remove the links into our pod log directory.
remove_log_links() {
  local l
  for l in /var/log/containers/*.log; do
    [[ -L $l && $(readlink "$l") == "$B/pod-logs/"* ]] && rm -f "$l"
  done
  return 0
}

# run_waiting CMD...: runs a helper of ours in the background and waits for it, so
# that a signal to this script is handled at once, not when it ends.
CHILD=
run_waiting() {
  "$@" &
  CHILD=$!
  wait "$CHILD"
  CHILD=
}

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  [[ -n $CHILD ]] && kill -TERM "$CHILD" 2>/dev/null
  stop_bench_agent
  stop_kubelet
  [[ -n ${CRICTL:-} ]] && remove_pods
  "$REPO_ROOT/hack/containerd-down.sh"
  wipe_kubelet_root
  [[ -n ${AGENT_ROOT:-} ]] && wipe_agent_root
  remove_cgroups all
  remove_log_links
  restore_sysctls
  rm -rf "$STATIC" "$B/pod-logs" "$B/floor-root"
  ((rc == 0)) || log "bench-kubelet failed (exit $rc); logs in $LOGS"
  exit "$rc"
}

port_free() { [[ -z $(ss -Hltn "sport = :$1" 2>/dev/null) ]]; }

# ---------------------------------------------------------------- the pods

# The container's command, its probes: the same in the Pod YAML and the CRI configs.
# A timeout above the default 1 s: on a loaded machine a fork of busybox httpd
# or a runc exec can take longer, and the probes are meant to always pass.
TIMEOUT=5
CMD='mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 8080 -h /www'

write_pods() {
  rm -rf "$MANIFESTS" "$CRICTL_CFG"
  mkdir -p "$MANIFESTS" "$CRICTL_CFG"
  local i name
  for i in $(seq -w 1 "$PODS"); do
    name=bench-$i
    cat >"$MANIFESTS/$name.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: default
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: $IMAGE
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "$CMD"]
    livenessProbe:
      exec:
        command: ["cat", "/www/index.html"]
      periodSeconds: 2
      timeoutSeconds: $TIMEOUT
    readinessProbe:
      httpGet:
        path: /
        port: 8080
      periodSeconds: 2
      timeoutSeconds: $TIMEOUT
YAML
    cat >"$CRICTL_CFG/$name-pod.json" <<JSON
{"metadata": {"name": "$name", "namespace": "default", "uid": "bench-kubelet-$name", "attempt": 0},
 "hostname": "$name", "log_directory": "$B/pod-logs/$name",
 "linux": {"security_context": {"namespace_options": {"pid": 1}}}}
JSON
    cat >"$CRICTL_CFG/$name-web.json" <<JSON
{"metadata": {"name": "web", "attempt": 0}, "image": {"image": "$IMAGE"},
 "command": ["/bin/sh", "-c", "$CMD"], "log_path": "web/0.log",
 "linux": {"security_context": {"namespace_options": {"pid": 1}}}}
JSON
  done
}

# ---------------------------------------------------------------- kubelet

write_kubelet_config() {
  mkdir -p "$KUBELET_ROOT" "$STATIC" "$B/pod-logs"
  cat >"$B/kubelet-config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: $STATIC
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
imageServiceEndpoint: unix://$CONTAINERD_SOCK
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
failSwapOn: false
failCgroupV1: false # these VMs are cgroup v1 (hybrid); kubelet >= 1.35 refuses v1 unless told
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: $KUBELET_RO_PORT # plain HTTP: /pods with statuses, /metrics/probes
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
podLogsDir: $B/pod-logs
volumePluginDir: $KUBELET_ROOT/volume-plugins
resolvConf: /etc/resolv.conf
YAML
}

start_kubelet() {
  [[ ${1:-} == empty ]] || cp "$MANIFESTS"/*.yaml "$STATIC/"
  # setsid: kubelet must not get the terminal's Ctrl-C; $! is kubelet itself.
  setsid "$KUBELET_BIN" --config="$B/kubelet-config.yaml" --root-dir="$KUBELET_ROOT" \
    --cert-dir="$KUBELET_ROOT/pki" --hostname-override="$NODE" -v="$KUBELET_V" \
    >>"$LOGS/kubelet.log" 2>&1 </dev/null &
  echo $! >"$KUBELET_PID"
  for _ in $(seq 1 300); do
    curl -fs "127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" >/dev/null 2>&1 && break
    alive "$KUBELET_PID" "$KUBELET_BIN" || { tail -20 "$LOGS/kubelet.log" >&2; die "kubelet exited at start; see $LOGS/kubelet.log"; }
    sleep 0.1
  done
  curl -fs "127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" >/dev/null || die "kubelet not healthy within 30 s; see $LOGS/kubelet.log"
  log "kubelet $K8S_VERSION running (pid $(cat "$KUBELET_PID"), -v=$KUBELET_V)"
}

# ---------------------------------------------------------------- the agent

create_pods() {
  local i name pod ctr
  for i in $(seq -w 1 "$PODS"); do
    name=bench-$i
    pod=$("$CRICTL" runp "$CRICTL_CFG/$name-pod.json")
    ctr=$("$CRICTL" create "$pod" "$CRICTL_CFG/$name-web.json" "$CRICTL_CFG/$name-pod.json")
    "$CRICTL" start "$ctr" >/dev/null
  done
  log "$PODS pods made with crictl"
}

# start_agent ARGS...: bin/cri-prober run on our containerd, its pods from
# ARGS, its API on AGENT_PORT.
start_agent() {
  # its /var/log/containers links in our own directory: kubelet's are the node's
  setsid "$REPO_ROOT/bin/cri-prober" run --runtime-endpoint "unix://$CONTAINERD_SOCK" \
    --container-log-link-dir "$CRI_PROBER_DIR/containers" "$@" --listen "127.0.0.1:$AGENT_PORT" \
    >>"$LOGS/agent.log" 2>&1 </dev/null &
  echo $! >"$AGENT_PID"
  for _ in $(seq 1 100); do
    curl -fs "127.0.0.1:$AGENT_PORT/healthz" >/dev/null 2>&1 && break
    alive "$AGENT_PID" "$REPO_ROOT/bin/cri-prober run" || { tail -20 "$LOGS/agent.log" >&2; die "cri-prober exited at start; see $LOGS/agent.log"; }
    sleep 0.1
  done
  log "$("$REPO_ROOT/bin/cri-prober" version 2>/dev/null | head -1) running (pid $(cat "$AGENT_PID"))"
}

# ---------------------------------------------------------------- startup

AGENT_ROOT=$B/agent-root
STARTUP_SETTLE=${BENCH_STARTUP_SETTLE:-5}

# write_startup_pods N: N pods of one container each, busybox httpd with a
# readiness probe every second, into $MANIFESTS.
write_startup_pods() {
  rm -rf "$MANIFESTS" && mkdir -p "$MANIFESTS"
  local i
  for i in $(seq -w 1 "$1"); do
    cat >"$MANIFESTS/start-$i.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: start-$i
  namespace: default
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: $IMAGE
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "$CMD"]
    readinessProbe:
      httpGet:
        path: /
        port: 8080
      periodSeconds: 1
YAML
  done
}

start_static_agent() {
  mkdir -p "$STATIC" "$AGENT_ROOT" "$B/pod-logs"
  start_agent --static-pod-path "$STATIC" --hostname-override "$NODE" --root-dir "$AGENT_ROOT" \
    --pod-logs-dir "$B/pod-logs" --cgroup-root "/$CGROUP_ROOT"
}

# wipe_agent_root: what the agent made on the host for its pods.
wipe_agent_root() { wipe_root "$AGENT_ROOT"; }

startup_once() { # startup_once RUN N MODE
  local out=$RESULTS/run-$1-$2-$3.json
  rm -f "$STATIC"/*.yaml "$STATIC"/.*.yaml
  case $3 in
    kubelet)
      wipe_kubelet_root
      start_kubelet empty
      sleep "$STARTUP_SETTLE" # kubelet's own start-up work done
      run_waiting "$BENCH" startup -mode kubelet -manifests "$MANIFESTS" -static "$STATIC" \
        -url "http://127.0.0.1:$KUBELET_RO_PORT/pods" -endpoint "unix://$CONTAINERD_SOCK" -out "$out"
      stop_kubelet
      ;;
    agent)
      wipe_agent_root
      start_static_agent
      sleep "$STARTUP_SETTLE"
      run_waiting "$BENCH" startup -mode agent -manifests "$MANIFESTS" -static "$STATIC" \
        -url "http://127.0.0.1:$AGENT_PORT/api/v1/pods" -endpoint "unix://$CONTAINERD_SOCK" -out "$out"
      stop_bench_agent
      wipe_agent_root
      ;;
    floor)
      mkdir -p "$B/pod-logs"
      run_waiting "$BENCH" startup -mode floor -manifests "$MANIFESTS" -node "$NODE" -root-dir "$B/floor-root" \
        -logs "$B/pod-logs" -cgroup-root "/$CGROUP_ROOT" -endpoint "unix://$CONTAINERD_SOCK" -out "$out"
      ;;
  esac
  rm -f "$STATIC"/*.yaml
  remove_pods
  remove_log_links
}

startup_main() {
  local runs=${BENCH_STARTUP_RUNS:-3} sizes=${BENCH_STARTUP_SIZES:-"1 30"} run n mode
  [[ $runs =~ ^[1-9][0-9]*$ ]] || die "BENCH_STARTUP_RUNS must be a positive number, not $runs"
  for run in $(seq 1 "$runs"); do
    for n in $sizes; do
      write_startup_pods "$n"
      # Each in turn, the order changing from run to run.
      for mode in $(printf '%s\n' kubelet agent floor | shuf); do
        log "== run $run of $runs: $n pods, $mode"
        startup_once "$run" "$n" "$mode"
      done
    done
  done
  "$BENCH" startup-report -dir "$RESULTS" -md "$MD" \
    -command "$([[ $runs == 3 ]] || echo "BENCH_STARTUP_RUNS=$runs ")make bench-startup" \
    -header "Each pod is one \`$IMAGE\` container (busybox httpd) with an HTTP readiness probe every 1 s. The clock starts when the manifests are written into the static pod directory (each written beside and renamed into place) of a kubelet $K8S_VERSION (standalone, \`-v=$KUBELET_V\`) or of \`cri-prober run --static-pod-path\` ($("$REPO_ROOT/bin/cri-prober" version | head -1 | awk '{print $2}')), each started ${STARTUP_SETTLE} s before, alone on one private containerd. *Running* is the container's StartedAt as the runtime reports it; *Ready* is when each one's API (kubelet's /pods, the agent's /api/v1/pods, polled every 20 ms) first shows the pod Ready. The floor makes the same sandboxes and containers (the CRI configs kubelet makes of the same manifests, \`pkg/podconfig\`) directly through CRI, all at once, with nothing else (no files, image checks, events or probes), and counts a pod ready when its server first answers (polled every 10 ms: no probe period)."
  log "bench-startup: wrote $(realpath --relative-to="$REPO_ROOT" "$MD") (results in $RESULTS)"
}

# ---------------------------------------------------------------- main

for p in $KUBELET_PORT $KUBELET_RO_PORT $KUBELET_HEALTHZ_PORT $AGENT_PORT; do
  port_free "$p" || die "port $p is in use (another bench-kubelet?); nothing started"
done
alive "$KUBELET_PID" "$KUBELET_BIN" && die "a kubelet of an earlier bench-kubelet is still running (pid $(cat "$KUBELET_PID")); nothing started"

KUBELET_BIN=$("$REPO_ROOT/hack/kubelet/build.sh")
CRICTL=$("$REPO_ROOT/hack/crictl.sh")
BENCH=$(build_tool benchkubelet)

mkdir -p "$B" "$LOGS"
rm -rf "$RESULTS" && mkdir -p "$RESULTS"
: >"$LOGS/kubelet.log"
: >"$LOGS/agent.log"
save_sysctls
trap cleanup EXIT
trap 'exit 130' INT TERM

"$REPO_ROOT/hack/containerd-up.sh"
write_kubelet_config
make_cgroups

if [[ ${1:-} == startup ]]; then
  startup_main
  exit 0
fi
write_pods

measure() { # measure LABEL PIDFILE METRICS-URL RUN
  run_waiting "$BENCH" measure -label "$1" -pid "$(cat "$2")" -containerd-pid "$(cat "$CONTAINERD_PID")" \
    -socket "$CONTAINERD_SOCK" -metrics "$3" -settle "$SETTLE" -window "$WINDOW" -out "$RESULTS/run-$4-$1.json"
}

for run in $(seq 1 "$RUNS"); do
  log "== run $run of $RUNS: kubelet"
  wipe_kubelet_root
  start_kubelet
  run_waiting "$BENCH" wait -format kubelet -url "http://127.0.0.1:$KUBELET_RO_PORT/pods" -pods "$PODS" -timeout 3m
  measure kubelet "$KUBELET_PID" "http://127.0.0.1:$KUBELET_RO_PORT/metrics/probes" "$run"
  stop_kubelet
  rm -f "$STATIC"/*.yaml
  remove_pods
  remove_log_links

  log "== run $run of $RUNS: cri-prober"
  create_pods
  start_agent --pod-manifests "$MANIFESTS"
  run_waiting "$BENCH" wait -format agent -url "http://127.0.0.1:$AGENT_PORT/api/v1/pods" -pods "$PODS" -timeout 3m
  measure agent "$AGENT_PID" "http://127.0.0.1:$AGENT_PORT/metrics/probes" "$run"
  stop_bench_agent
  remove_pods
done

"$BENCH" report -dir "$RESULTS" -runs "$RUNS" -md "$MD" \
  -command "$([[ $RUNS == 3 ]] || echo "BENCH_KUBELET_RUNS=$RUNS ")make bench-kubelet" \
  -go "$(go version | awk '{print $3}')" -kubelet-version "$K8S_VERSION" -kubelet-v "$KUBELET_V" \
  -pods "$PODS" -settle "$SETTLE" -timeout "$TIMEOUT" -image "$IMAGE" -agent-version "$("$REPO_ROOT/bin/cri-prober" version | head -1 | awk '{print $2}')"
log "bench-kubelet: wrote $(realpath --relative-to="$REPO_ROOT" "$MD") (results in $RESULTS)"
