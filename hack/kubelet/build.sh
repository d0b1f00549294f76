#!/usr/bin/env bash
# Builds a real kubelet from the Go module proxy (k8s.io/kubernetes at
# K8S_VERSION, default v1.36.3) and caches the binary; prints its path.
# About 4 minutes on 2 cores with a warm module cache, up to 20 cold.
# Used by hack/bench-kubelet.sh to measure cri-prober beside kubelet.
#
# The module zip of k8s.io/kubernetes has no staging/ modules and an empty
# vendor/: drop vendor and go.work, and point each `k8s.io/x => ./staging/…`
# replace at the published k8s.io/x v0.Y.Z of the same release (or the
# nearest later patch of that minor when one is missing).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

K8S_VERSION=${K8S_VERSION:-v1.36.3}
minor_patch=${K8S_VERSION#v1.}      # 36.3
minor=${minor_patch%%.*}            # 36
staging=v0.$minor_patch             # kubernetes v1.Y.Z <-> staging v0.Y.Z
bin=${KUBELET_BIN:-$CACHE_DIR/kubelet-$K8S_VERSION}

if [[ -x $bin ]] && "$bin" --version 2>/dev/null | grep -qx "Kubernetes $K8S_VERSION"; then
  echo "$bin"
  exit 0
fi

mkdir -p "$(dirname "$bin")"
log "downloading k8s.io/kubernetes@$K8S_VERSION from the Go module proxy"
src=$(cd / && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -d $src ]] || die "could not download k8s.io/kubernetes@$K8S_VERSION through the Go module proxy"
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
rm -rf "$work/vendor" "$work/go.work" "$work/go.work.sum"
cd "$work"

args=()
for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => \./staging/.*#\1#p' go.mod); do
  versions=$(cd / && go list -m -versions "$m" 2>/dev/null | tr ' ' '\n' | tail -n +2 || true)
  pick=
  if grep -qx -- "$staging" <<<"$versions"; then
    pick=$staging
  else # the nearest later patch of the same minor (e.g. sample-apiserver has no v0.36.3)
    pick=$(grep -E "^v0\.$minor\.[0-9]+$" <<<"$versions" | sort -V |
      while read -r v; do
        [[ $(printf '%s\n%s\n' "$staging" "$v" | sort -V | head -1) == "$staging" ]] && { echo "$v"; break; }
      done || true)
  fi
  if [[ -n $pick ]]; then
    args+=("-replace=$m=$m@$pick")
  else
    args+=("-dropreplace=$m")
    log "no published $m for v0.$minor: dropping its replace"
  fi
done
go mod edit "${args[@]}"

ldflags="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
ldflags+=" -X k8s.io/component-base/version.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
log "building kubelet $K8S_VERSION (about 4 minutes on 2 cores with a warm module cache, up to 20 cold)"
GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" ./cmd/kubelet >&2
mv "$bin.tmp" "$bin"
"$bin" --version >&2
echo "$bin"
