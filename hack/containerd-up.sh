#!/usr/bin/env bash
# Starts a private containerd for tests and demos: its own root, state,
# socket, CNI bridge and images, all under $CRI_PROBER_DIR. Idempotent: a
# containerd already started by this script is left running. Stop it with
# hack/containerd-down.sh.
#   --daemon-only  only (re)start the daemon on the existing root: the e2e
#                  outage test restarts containerd this way mid-run.
# CONTAINERD_ROOT_SIZE (e.g. 64m), opt-in: the root (images, snapshots) is
# a tmpfs of that size, a small image filesystem for the image garbage
# collection test; hack/containerd-down.sh unmounts it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

daemon_only=false
[[ ${1:-} == --daemon-only ]] && daemon_only=true

$daemon_only || "$REPO_ROOT/hack/install-deps.sh"

if containerd_running && [[ -S $CONTAINERD_SOCK ]]; then
  log "containerd already running (pid $(cat "$CONTAINERD_PID"), socket $CONTAINERD_SOCK)"
else
  mkdir -p "$CRI_PROBER_DIR"/{root,state,cni/conf,cni/data,opt}
  if [[ -n ${CONTAINERD_ROOT_SIZE:-} ]] && ! mountpoint -q "$CRI_PROBER_DIR/root"; then
    mount -t tmpfs -o "size=$CONTAINERD_ROOT_SIZE,mode=0711" cri-prober-root "$CRI_PROBER_DIR/root"
    log "containerd root: a tmpfs of $CONTAINERD_ROOT_SIZE"
  fi
  cat >"$CRI_PROBER_DIR/config.toml" <<TOML
version = 2
root = "$CRI_PROBER_DIR/root"
state = "$CRI_PROBER_DIR/state"

[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[debug]
  address = "$CRI_PROBER_DIR/debug.sock"
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$CRI_PROBER_DIR/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:test"
  # Required on these VMs: without it runc cannot write a negative
  # oom_score_adj and every RunPodSandbox fails.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      # As the reference kubelet's containerd (../shared/kubelet): the same
      # runtime options, so that crictl inspect compares like with like.
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CRI_PROBER_DIR/cni/conf"
    max_conf_num = 1
TOML
  cat >"$CRI_PROBER_DIR/cni/conf/10-cri-prober.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "cri-prober",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$CRI_PROBER_DIR/cni/data",
        "ranges": [[{"subnet": "$CNI_SUBNET"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
JSON
  rm -f "$CONTAINERD_SOCK"
  log "starting containerd (log: $CONTAINERD_LOG)"
  # setsid: containerd must not die with the shell that started it, and
  # must not receive the terminal's Ctrl-C meant for a demo.
  setsid containerd --config "$CRI_PROBER_DIR/config.toml" >>"$CONTAINERD_LOG" 2>&1 </dev/null &
  echo $! >"$CONTAINERD_PID"
  for _ in $(seq 1 300); do
    [[ -S $CONTAINERD_SOCK ]] && ctr -a "$CONTAINERD_SOCK" version >/dev/null 2>&1 && break
    containerd_running || { tail -20 "$CONTAINERD_LOG" >&2; die "containerd exited at start; see $CONTAINERD_LOG"; }
    sleep 0.1
  done
  ctr -a "$CONTAINERD_SOCK" version >/dev/null 2>&1 || die "containerd did not answer on $CONTAINERD_SOCK within 30s; see $CONTAINERD_LOG"
  log "containerd running (pid $(cat "$CONTAINERD_PID"), socket $CONTAINERD_SOCK)"
fi

$daemon_only || "$REPO_ROOT/hack/images.sh"
