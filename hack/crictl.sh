#!/usr/bin/env bash
# Builds crictl from the cri-tools module (not packaged in Debian 12, and
# `go install` fails on its replace directives) and caches the binary.
# Prints the binary's path.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CRICTL_VERSION=${CRICTL_VERSION:-v1.30.0}
bin="$CACHE_DIR/crictl-$CRICTL_VERSION"
if [[ -x $bin ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$CACHE_DIR"
src=$(go mod download -json "sigs.k8s.io/cri-tools@$CRICTL_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -d $src ]] || die "could not download sigs.k8s.io/cri-tools@$CRICTL_VERSION through the Go module proxy"
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
rm -rf "$work/vendor"
log "building crictl $CRICTL_VERSION (about a minute on 2 cores, once)"
(cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -o "$bin.tmp" ./cmd/crictl) >&2
mv "$bin.tmp" "$bin"
echo "$bin"
