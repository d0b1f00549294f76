#!/usr/bin/env bash
# Provides the tools that check the deploy files (make test-deploy), from
# Debian packages, and prints promtool's path:
#   promtool         taken out of Debian's prometheus package into
#                    $CACHE_DIR, once. The package itself is not installed:
#                    its postinst would start a Prometheus server now (unless
#                    policy-rc.d forbids it) and enable it at every boot,
#                    and only the checker is wanted. A promtool already on
#                    PATH is used as it is.
#   systemd-analyze  the systemd package, installed if missing.
# Idempotent and noninteractive; apt runs only when something is missing.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

export DEBIAN_FRONTEND=noninteractive
apt_updated=false
apt_update() {
  $apt_updated && return
  [[ $(id -u) -eq 0 ]] || die "run as root to install from Debian packages"
  apt-get update -qq >&2
  apt_updated=true
}

if ! command -v systemd-analyze >/dev/null; then
  log "installing systemd (for systemd-analyze)"
  apt_update
  apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi

if command -v promtool >/dev/null; then
  command -v promtool
  exit 0
fi
if bin=$(compgen -G "$CACHE_DIR/prometheus-*/usr/bin/promtool" | sort -V | tail -1) && [[ -x $bin ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$CACHE_DIR"
work=$(mktemp -d "$CACHE_DIR/.prometheus.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "downloading Debian's prometheus package for promtool (about 20 MB, once)"
if ! (cd "$work" && apt-get download -qq prometheus) >&2 2>/dev/null; then
  apt_update
  (cd "$work" && apt-get download -qq prometheus) >&2
fi
deb=$(compgen -G "$work/prometheus_*.deb" | head -1) || die "apt-get download prometheus gave no package"
version=$(dpkg-deb -f "$deb" Version)
dpkg-deb -x "$deb" "$work/root"
[[ -x $work/root/usr/bin/promtool ]] || die "$deb has no usr/bin/promtool"
dest="$CACHE_DIR/prometheus-$version"
# Only promtool is kept; a concurrent run may have placed it already.
mkdir -p "$work/keep/usr/bin"
mv "$work/root/usr/bin/promtool" "$work/keep/usr/bin/"
mv -T "$work/keep" "$dest" 2>/dev/null || [[ -x $dest/usr/bin/promtool ]] || die "could not place promtool in $dest"
echo "$dest/usr/bin/promtool"
