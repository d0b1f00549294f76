#!/usr/bin/env bash
# Provides a Prometheus server binary for the e2e test that runs the
# shipped scrape config and rules against real agents (test/e2e,
# TestPrometheus*), and prints its path. As hack/install-promtool.sh does
# for promtool, it is taken out of Debian's prometheus package into
# $CACHE_DIR, once, and the package is not installed: its postinst would
# start a Prometheus server now and enable it at every boot. The test
# starts its own, on a private port and data directory, and stops it.
# A prometheus already on PATH is used as it is.
# Idempotent and noninteractive; apt runs only when something is missing.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

if command -v prometheus >/dev/null; then
  command -v prometheus
  exit 0
fi
if bin=$(compgen -G "$CACHE_DIR/prometheus-server-*/usr/bin/prometheus" | sort -V | tail -1) && [[ -x $bin ]]; then
  echo "$bin"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
mkdir -p "$CACHE_DIR"
work=$(mktemp -d "$CACHE_DIR/.prometheus-server.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "downloading Debian's prometheus package for its server (about 20 MB, once)"
if ! (cd "$work" && apt-get download -qq prometheus) >&2 2>/dev/null; then
  [[ $(id -u) -eq 0 ]] || die "run as root to download Debian's prometheus package"
  apt-get update -qq >&2
  (cd "$work" && apt-get download -qq prometheus) >&2
fi
deb=$(compgen -G "$work/prometheus_*.deb" | head -1) || die "apt-get download prometheus gave no package"
version=$(dpkg-deb -f "$deb" Version)
dpkg-deb -x "$deb" "$work/root"
[[ -x $work/root/usr/bin/prometheus ]] || die "$deb has no usr/bin/prometheus"
dest="$CACHE_DIR/prometheus-server-$version"
# Only the server is kept (no unit, no /etc); a concurrent run may have
# placed it already.
mkdir -p "$work/keep/usr/bin"
mv "$work/root/usr/bin/prometheus" "$work/keep/usr/bin/"
mv -T "$work/keep" "$dest" 2>/dev/null || [[ -x $dest/usr/bin/prometheus ]] || die "could not place prometheus in $dest"
echo "$dest/usr/bin/prometheus"
