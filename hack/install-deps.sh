#!/usr/bin/env bash
# Installs what the real-containerd tests need, from Debian packages, when it
# is missing. Idempotent: apt-get runs only if a package is missing.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || die "run as root: containerd, CNI and network namespaces need it"
command -v go >/dev/null || die "Go is not installed (expected at /usr/local/go/bin/go)"

# busybox-static, not busybox: the test images have no libc.
packages=(containerd runc containernetworking-plugins busybox-static iproute2)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  apt_install "${missing[@]}"
fi
