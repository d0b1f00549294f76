#!/usr/bin/env bash
# Builds the release artifacts into OUT (default dist/), for each GOARCH
# (default amd64 and arm64), all static binaries (CGO_ENABLED=0):
#   cri-prober-VERSION-linux-ARCH.tar.gz   the binary, LICENSE, README.md, deploy/
#   cri-prober_DEBVERSION_ARCH.deb         /usr/bin/cri-prober, the unit in
#                                          /lib/systemd/system, /etc/cri-prober/config.yaml
#                                          (a conffile), built with dpkg-deb
#   cri-prober-VERSION-linux-ARCH-image.tar the container image (hack/image.sh)
#   SHA256SUMS                             of all of the above (sha256sum -c SHA256SUMS)
# make release runs it.
#   hack/release.sh [--arch amd64,arm64] [--out DIR]
#   hack/release.sh --deb-version VERSION   print VERSION as a Debian version
# Environment: VERSION and COMMIT (default: from git); DEB_COMPRESSION
# (xz, as Debian's own packages; gzip is 10 times faster, for tests).
# Archives are reproducible: file times are the commit's, owners root.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# deb_version turns `git describe` output into a Debian version (digits
# first; letters, digits and . + ~ only, no hyphen without a revision):
#   v1.2.3 → 1.2.3, v1.2.3-4-gabc1234 → 1.2.3+4.gabc1234,
#   v1.2.3-rc.1 → 1.2.3~rc.1 (sorts before 1.2.3), abc1234-dirty → 0~gabc1234+dirty.
deb_version() {
  local v=${1#v} dirty=
  if [[ $v == *-dirty ]]; then v=${v%-dirty} dirty=+dirty; fi
  if [[ $v =~ ^[0-9a-f]{7,40}$ ]]; then # no tag: describe --always gave a commit
    v="0~g$v"
  elif [[ $v =~ ^([0-9][^-]*)-([0-9]+)-(g[0-9a-f]+)$ ]]; then
    v="${BASH_REMATCH[1]}+${BASH_REMATCH[2]}.${BASH_REMATCH[3]}"
  elif [[ $v =~ ^([0-9][0-9.]*)-(.+)$ ]]; then
    v="${BASH_REMATCH[1]}~${BASH_REMATCH[2]}"
  fi
  v=$(printf '%s' "$v" | tr -c 'A-Za-z0-9.+~' '.')
  [[ $v == [0-9]* ]] || v="0~$v"
  printf '%s%s\n' "$v" "$dirty"
}

arches=amd64,arm64
out="$REPO_ROOT/dist"
while (($#)); do
  case $1 in
    --deb-version) deb_version "$2"; exit 0 ;;
    --arch) arches=$2; shift 2 ;;
    --out) out=$(realpath -m "$2"); shift 2 ;;
    *) die "usage: hack/release.sh [--arch amd64,arm64] [--out DIR] | --deb-version VERSION" ;;
  esac
done
VERSION=${VERSION:-$(git -C "$REPO_ROOT" describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git -C "$REPO_ROOT" rev-parse --short=12 HEAD 2>/dev/null || true)}
export VERSION COMMIT
debversion=$(deb_version "$VERSION")
dpkg --validate-version "$debversion" || die "$VERSION gives the Debian version $debversion, which dpkg refuses"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$REPO_ROOT" log -1 --format=%ct 2>/dev/null || echo 0)}
command -v dpkg-deb >/dev/null || die "dpkg-deb is missing (Debian's dpkg package)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
artifacts=()

# reproducible_tar DIR NAME… writes a gzipped tar of NAMEs under DIR to stdout.
reproducible_tar() {
  local dir=$1
  shift
  tar -C "$dir" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -cf - "$@" | gzip -9n
}

for arch in ${arches//,/ }; do
  case $arch in
    amd64 | arm64) debarch=$arch ;;
    *) die "unsupported GOARCH $arch (amd64, arm64)" ;;
  esac
  log "building cri-prober $VERSION for linux/$arch"
  bin="$work/$arch/cri-prober"
  (cd "$REPO_ROOT" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -X main.version=$VERSION -X main.commit=$COMMIT" -o "$bin" ./cmd/cri-prober)

  # The archive: one directory named after it.
  name="cri-prober-$VERSION-linux-$arch"
  mkdir -p "$work/$arch/tree/$name"
  cp "$bin" "$REPO_ROOT/LICENSE" "$REPO_ROOT/README.md" "$work/$arch/tree/$name/"
  cp -r "$REPO_ROOT/deploy" "$work/$arch/tree/$name/deploy"
  reproducible_tar "$work/$arch/tree" "$name" >"$out/$name.tar.gz"
  artifacts+=("$name.tar.gz")

  # The .deb: the layout of make install with PREFIX=/usr.
  root="$work/$arch/deb"
  DESTDIR=$root PREFIX=/usr SYSTEMDUNITDIR=/lib/systemd/system "$REPO_ROOT/hack/install.sh" "$bin"
  install -D -m 0644 "$REPO_ROOT/LICENSE" "$root/usr/share/doc/cri-prober/copyright"
  install -d "$root/DEBIAN"
  cat >"$root/DEBIAN/control" <<EOF
Package: cri-prober
Version: $debversion
Architecture: $debarch
Maintainer: cri-prober maintainers <cri-prober@users.noreply.github.com>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Section: admin
Priority: optional
Recommends: containerd | containerd.io
Homepage: https://github.com/cri-prober/cri-prober
Description: Kubernetes probes for containerd without kubelet
 cri-prober is a node agent that gives containers run by containerd
 Kubernetes liveness, readiness and startup probes, and restarts, over CRI,
 with kubelet's semantics and without kubelet. One static binary.
 .
 Enable it once /etc/cri-prober/config.yaml and /etc/cri-prober/pods say
 what to probe: systemctl enable --now cri-prober.
EOF
  echo /etc/cri-prober/config.yaml >"$root/DEBIAN/conffiles"
  # Installing does not start the agent (it restarts containers: the
  # operator enables it once the configuration is right); an upgrade
  # restarts a running one; removing stops and disables it.
  cat >"$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null || true
  if [ -n "$2" ]; then systemctl try-restart cri-prober.service >/dev/null || true; fi
fi
EOF
  cat >"$root/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ]; then
  if [ -d /run/systemd/system ]; then systemctl stop cri-prober.service cri-prober.socket >/dev/null || true; fi
  if command -v systemctl >/dev/null; then systemctl disable cri-prober.service cri-prober.socket >/dev/null 2>&1 || true; fi
fi
EOF
  cat >"$root/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
  if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null || true; fi
fi
if [ "$1" = purge ]; then rm -rf /var/lib/cri-prober; fi
EOF
  chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"
  deb="cri-prober_${debversion}_$debarch.deb"
  dpkg-deb --root-owner-group -Z"${DEB_COMPRESSION:-xz}" --build "$root" "$out/$deb" >/dev/null
  artifacts+=("$deb")

  image="$name-image.tar"
  "$REPO_ROOT/hack/image.sh" "$bin" "$out/$image" "$arch"
  artifacts+=("$image")
done

(cd "$out" && sha256sum "${artifacts[@]}" >SHA256SUMS)
log "release $VERSION in $out: ${artifacts[*]} SHA256SUMS"
