# Shared settings for the hack/ scripts. Everything the scripts create lives
# under $CRI_PROBER_DIR so that a test run never touches a system containerd
# and cleanup knows exactly what to remove.
shopt -s inherit_errexit
export PATH="/usr/local/go/bin:$PATH"

CRI_PROBER_DIR=${CRI_PROBER_DIR:-/var/tmp/cri-prober}
CACHE_DIR=${CRI_PROBER_CACHE_DIR:-/var/cache/cri-prober}
CONTAINERD_SOCK="$CRI_PROBER_DIR/containerd.sock"
CONTAINERD_PID="$CRI_PROBER_DIR/containerd.pid"
CONTAINERD_LOG="$CRI_PROBER_DIR/containerd.log"
CNI_BRIDGE=${CNI_BRIDGE:-criprober0}
CNI_SUBNET=${CNI_SUBNET:-10.88.231.0/24}
IMAGES_DIR="$CRI_PROBER_DIR/images"
AGENT_PID="$CRI_PROBER_DIR/agent.pid"
AGENT_LOG="$CRI_PROBER_DIR/agent.log"
TOOLS_DIR="$CRI_PROBER_DIR/bin"
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

export CONTAINER_RUNTIME_ENDPOINT="unix://$CONTAINERD_SOCK"

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

# containerd_running succeeds when the containerd we started is alive.
containerd_running() {
  [[ -f $CONTAINERD_PID ]] && kill -0 "$(cat "$CONTAINERD_PID")" 2>/dev/null
}

# stop_agent stops a cri-prober agent the demo started, by its PID.
stop_agent() {
  if [[ -f $AGENT_PID ]]; then
    local pid
    pid=$(cat "$AGENT_PID")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$AGENT_PID"
  fi
}

# build_tool builds a Go program of hack/tools into $TOOLS_DIR.
build_tool() {
  mkdir -p "$TOOLS_DIR"
  (cd "$REPO_ROOT" && CGO_ENABLED=0 go build -o "$TOOLS_DIR/$1" "./hack/tools/$1") || return 1
  echo "$TOOLS_DIR/$1"
}

# build_host_binary builds cri-prober for this host into $TOOLS_DIR (to run
# it where the binary at hand was built for another architecture).
build_host_binary() {
  mkdir -p "$TOOLS_DIR"
  (cd "$REPO_ROOT" && CGO_ENABLED=0 go build -o "$TOOLS_DIR/cri-prober-host" ./cmd/cri-prober) || return 1
  echo "$TOOLS_DIR/cri-prober-host"
}

# apt_update updates the package lists, once per script (root only).
apt_updated=false
apt_update() {
  $apt_updated && return
  [[ $(id -u) -eq 0 ]] || die "run as root to install from Debian packages (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  apt_updated=true
}

# apt_install installs Debian packages, noninteractively (root only).
apt_install() {
  apt_update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# prometheus_deb_binary prints the path of usr/bin/NAME taken out of
# Debian's prometheus package into $CACHE_DIR/DIR-<version>, once (NAME on
# PATH is used as it is). The package is never installed: its postinst
# would start a Prometheus server now and enable it at every boot, and only
# the binary is wanted (promtool to check the deploy files, the server for
# the e2e test that runs the shipped config and rules). A subshell, so that
# its EXIT trap removes the work directory however it ends.
prometheus_deb_binary() (
  local name=$1 dir=$2 bin work deb version dest
  if command -v "$name" >/dev/null; then
    command -v "$name"
    return 0
  fi
  if bin=$(compgen -G "$CACHE_DIR/$dir-*/usr/bin/$name" | sort -V | tail -1) && [[ -x $bin ]]; then
    echo "$bin"
    return 0
  fi
  mkdir -p "$CACHE_DIR"
  work=$(mktemp -d "$CACHE_DIR/.$dir.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  log "downloading Debian's prometheus package for $name (about 20 MB, once)"
  if ! (cd "$work" && apt-get download -qq prometheus) >&2 2>/dev/null; then
    apt_update
    (cd "$work" && apt-get download -qq prometheus) >&2
  fi
  deb=$(compgen -G "$work/prometheus_*.deb" | head -1) || die "apt-get download prometheus gave no package"
  version=$(dpkg-deb -f "$deb" Version)
  dpkg-deb -x "$deb" "$work/root"
  [[ -x $work/root/usr/bin/$name ]] || die "$deb has no usr/bin/$name"
  dest="$CACHE_DIR/$dir-$version"
  # Only the binary is kept; a concurrent run may have placed it already.
  mkdir -p "$work/keep/usr/bin"
  mv "$work/root/usr/bin/$name" "$work/keep/usr/bin/"
  mv -T "$work/keep" "$dest" 2>/dev/null || [[ -x $dest/usr/bin/$name ]] || die "could not place $name in $dest"
  echo "$dest/usr/bin/$name"
)
