#!/usr/bin/env bash
# Packs a cri-prober binary as a container image archive, with no registry
# and no docker: the static binary alone on an empty base, entrypoint
# /usr/bin/cri-prober, command `run`. `ctr -n k8s.io images import` loads it
# (on each node, for deploy/kubernetes/daemonset.yaml). make image runs it.
#   hack/image.sh BINARY OUT [GOARCH]
# Environment: VERSION and COMMIT (default: from git), IMAGE (the name,
# default localhost/cri-prober). The archive holds two tags of one image:
# IMAGE:latest, which the DaemonSet names, and IMAGE:VERSION.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

(($# == 2 || $# == 3)) || die "usage: hack/image.sh BINARY OUT [GOARCH]"
binary=$(realpath "$1")
out=$(realpath -m "$2")
arch=${3:-$(go env GOARCH)}
VERSION=${VERSION:-$(git -C "$REPO_ROOT" describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git -C "$REPO_ROOT" rev-parse HEAD 2>/dev/null || true)}
IMAGE=${IMAGE:-localhost/cri-prober}

# A tag is at most 128 of [A-Za-z0-9_.-], not starting with . or -.
tag=$(printf '%s' "$VERSION" | tr -c 'A-Za-z0-9_.-' '-' | cut -c1-128)
[[ $tag == [.-]* ]] && tag="v$tag"

mkdir -p "$(dirname "$out")"
cd "$REPO_ROOT"
CGO_ENABLED=0 go run ./hack/tools/mkimage -o "$out" -arch "$arch" \
  -name "$IMAGE:latest" -name "$IMAGE:$tag" \
  -file "$binary=/usr/bin/cri-prober" \
  -entrypoint '["/usr/bin/cri-prober"]' -cmd '["run"]' -env PATH=/usr/bin:/bin \
  -label org.opencontainers.image.title=cri-prober \
  -label "org.opencontainers.image.description=Kubernetes probes for containerd without kubelet" \
  -label "org.opencontainers.image.version=$VERSION" \
  -label "org.opencontainers.image.revision=$COMMIT" \
  -label org.opencontainers.image.source=https://github.com/cri-prober/cri-prober \
  -label org.opencontainers.image.licenses=Apache-2.0
log "image $IMAGE:latest, $IMAGE:$tag ($arch) in $out; load it with: ctr -n k8s.io images import $out"
