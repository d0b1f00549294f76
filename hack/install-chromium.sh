#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium and its ChromeDriver, which the
# status page's e2e test drives over WebDriver (no browser download of a test
# tool's own: this machine reaches Debian's packages only). Idempotent and
# quiet: apt-get runs only when /usr/bin/chromedriver is missing.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

if [[ -x /usr/bin/chromedriver && -x /usr/bin/chromium ]]; then
  exit 0
fi
log "installing chromium chromium-driver"
apt_install chromium chromium-driver
[[ -x /usr/bin/chromedriver ]] || die "chromium-driver installed, but /usr/bin/chromedriver is missing"
