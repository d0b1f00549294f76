#!/usr/bin/env bash
# Provides a Prometheus server binary for the e2e test that runs the
# shipped scrape config and rules against real agents (test/e2e,
# TestPrometheus*), and prints its path: taken out of Debian's prometheus
# package, never installed (lib.sh, prometheus_deb_binary). The test starts
# its own, on a private port and data directory, and stops it.
# Idempotent and noninteractive; apt runs only when something is missing.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

prometheus_deb_binary prometheus prometheus-server
