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

if ! command -v systemd-analyze >/dev/null; then
  log "installing systemd (for systemd-analyze)"
  apt_install systemd
fi

prometheus_deb_binary promtool prometheus
