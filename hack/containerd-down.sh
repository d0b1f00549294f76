#!/usr/bin/env bash
# Stops the private containerd started by hack/containerd-up.sh and removes
# everything it left: pods (through CRI, so their networks are torn down),
# shims, mounts, the CNI bridge and the state directories. Safe to run when
# nothing is running. Keeps the image archives and tool binaries.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

stop_agent # the demo's agent, if any: it must not restart what we remove

if containerd_running && [[ -S $CONTAINERD_SOCK ]]; then
  if crireset=$(build_tool crireset 2>/dev/null); then
    timeout 120 "$crireset" --runtime-endpoint "unix://$CONTAINERD_SOCK" >&2 ||
      log "crireset failed; killing what is left"
  fi
fi

if [[ -f $CONTAINERD_PID ]]; then
  pid=$(cat "$CONTAINERD_PID")
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping containerd (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$CONTAINERD_PID"
fi

# Containers and their shims outlive containerd by design. Each task bundle
# in our state directory records its container's init PID (killing it ends
# the container's whole PID namespace); our shims are the ones whose
# -address is our socket.
for pidfile in "$CRI_PROBER_DIR"/state/io.containerd.runtime.v2.task/*/*/init.pid; do
  [[ -f $pidfile ]] || continue
  pid=$(cat "$pidfile")
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    log "killing leftover container process $pid ($(basename "$(dirname "$pidfile")" | cut -c1-13))"
    kill -KILL "$pid" 2>/dev/null || true
  fi
done
for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK( |$)" || true); do
  log "killing leftover shim $pid"
  kill -KILL "$pid" 2>/dev/null || true
done

# Pod network namespaces live in /run/netns, outside our directory; ours
# are the ones with an address in our CNI subnet (left behind only when
# containerd died before it could tear them down).
prefix="${CNI_SUBNET%.*}."
for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
  if ip -n "$ns" -4 -o addr show 2>/dev/null | awk '{print $4}' | grep -q "^${prefix//./\\.}"; then
    log "removing leftover network namespace $ns"
    ip netns delete "$ns" 2>/dev/null || true
  fi
done

# Unmount anything left below our directory, deepest first (the root's
# tmpfs of CONTAINERD_ROOT_SIZE last, after the snapshots mounted in it).
if [[ -d $CRI_PROBER_DIR ]]; then
  awk -v d="$CRI_PROBER_DIR/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
fi

ip link show "$CNI_BRIDGE" >/dev/null 2>&1 && ip link delete "$CNI_BRIDGE"
rm -rf "$CRI_PROBER_DIR"/{root,state,opt,cni,config.toml,containerd.sock,containerd.sock.ttrpc,debug.sock,agent-root,pod-logs,containers,demo-pods}

# The cgroups of the pods our agents made (--cgroup-root /cri-prober, the
# e2e tests' /cri-prober-e2e): empty once their containers are gone.
for root in /sys/fs/cgroup/*/cri-prober /sys/fs/cgroup/*/cri-prober-e2e /sys/fs/cgroup/unified/cri-prober /sys/fs/cgroup/unified/cri-prober-e2e; do
  [[ -d $root ]] && find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null
done
log "private containerd stopped and cleaned up"
