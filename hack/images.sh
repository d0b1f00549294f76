#!/usr/bin/env bash
# Builds the test images locally (no registry is reachable) and imports them
# into the private containerd's k8s.io namespace, where CRI finds them.
#   localhost/busybox:test  busybox-static with its applets; default cmd sh
#   localhost/pause:test    the same layer sleeping forever: the sandbox image
#   localhost/target:test   busybox plus test/target (HTTP, gRPC health, TCP)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

mkimage=$(build_tool mkimage)
mkdir -p "$IMAGES_DIR"

"$mkimage" -o "$IMAGES_DIR/busybox.tar" -name localhost/busybox:test \
  -busybox /usr/bin/busybox -cmd '["/bin/sh"]'
"$mkimage" -o "$IMAGES_DIR/pause.tar" -name localhost/pause:test \
  -busybox /usr/bin/busybox -entrypoint '["/bin/sleep","2147483647"]'
(cd "$REPO_ROOT" && CGO_ENABLED=0 go build -o "$TOOLS_DIR/target" ./test/target)
"$mkimage" -o "$IMAGES_DIR/target.tar" -name localhost/target:test \
  -busybox /usr/bin/busybox -file "$TOOLS_DIR/target=/bin/target" -entrypoint '["/bin/target"]'

for img in busybox pause target; do
  ctr -a "$CONTAINERD_SOCK" -n k8s.io images import "$IMAGES_DIR/$img.tar" >/dev/null
done
log "images imported: $(ctr -a "$CONTAINERD_SOCK" -n k8s.io images ls -q | grep '^localhost/' | tr '\n' ' ')"
