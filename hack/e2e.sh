#!/usr/bin/env bash
# Runs the end-to-end tests against a private containerd: starts it, runs
# `go test -tags e2e`, and always stops and cleans it up, pass or fail.
# Extra arguments go to `go test` (e.g. -run TestExit).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

cleanup() { "$REPO_ROOT/hack/containerd-down.sh" || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# The status page's test drives Debian's headless Chromium.
"$REPO_ROOT/hack/install-chromium.sh"
"$REPO_ROOT/hack/containerd-up.sh"

export CRI_PROBER_E2E_ENDPOINT="unix://$CONTAINERD_SOCK"
export CRI_PROBER_E2E_SUBNET="$CNI_SUBNET"
# The outage test stops containerd by its PID and starts it again.
export CRI_PROBER_E2E_CONTAINERD_PIDFILE="$CONTAINERD_PID"
export CRI_PROBER_E2E_CONTAINERD_UP="$REPO_ROOT/hack/containerd-up.sh"
export CRI_PROBER_E2E_BINARY="${CRI_PROBER_E2E_BINARY:-$REPO_ROOT/bin/cri-prober}"
# Prometheus's server (Debian's package, unpacked once, cached) scrapes the
# agents with the shipped config and rules (TestPrometheus*). Assigned
# before it is exported: `export X=$(cmd)` would hide cmd's failure.
CRI_PROBER_E2E_PROMETHEUS="${CRI_PROBER_E2E_PROMETHEUS:-$("$REPO_ROOT/hack/install-prometheus.sh")}"
export CRI_PROBER_E2E_PROMETHEUS
# crictl drives the CI-harness tests (built once, cached).
CRI_PROBER_E2E_CRICTL="${CRI_PROBER_E2E_CRICTL:-$("$REPO_ROOT/hack/crictl.sh")}"
export CRI_PROBER_E2E_CRICTL
# go test -v's output, and every event with its timing kept for make
# test's summary (hack/tools/testjson). The tests that call parallel(t)
# run four at a time, after the serial ones (test/e2e/framework_test.go):
# they mostly wait on containers and probe periods, not on the CPU.
testjson=$(build_tool testjson)
timings=${TEST_TIMINGS_DIR:-$REPO_ROOT/bin/test-timings}
cd "$REPO_ROOT"
go test -json -tags e2e -count=1 -p 1 -parallel "${E2E_PARALLEL:-4}" -timeout 15m ./test/e2e/... "$@" | "$testjson" filter -v -o "$timings/e2e.json"
