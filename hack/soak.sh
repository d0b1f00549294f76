#!/usr/bin/env bash
# make soak: the engine against the fake CRI runtime with 200 pods whose
# targets flap, for SOAK_DURATION (default 10m); then, as root, the same
# idea on a private real containerd for SOAK_E2E_DURATION (default 3m),
# then a node kept (a chatty static pod and a crash loop: log rotation and
# container GC) for SOAK_NODE_DURATION (default 30m).
# Writes the summary into docs/reliability.md unless SOAK_REPORT is empty.
# `make test` runs the short variants (1 minute, 30 seconds) without a report.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || { echo "soak: Go is not installed (expected at /usr/local/go/bin/go)" >&2; exit 1; }

duration=${SOAK_DURATION:-10m}
report=${SOAK_REPORT-$PWD/docs/reliability.md}
args=(-duration "$duration")
[[ -n $report ]] && args+=(-report "$report")

echo "== soak on the fake runtime: 200 pods, $duration"
go test -tags soak -count=1 -timeout 60m -run '^TestSoak$' -v ./test/soak -args "${args[@]}"

if [[ $EUID -eq 0 ]]; then
	echo "== soak on a private containerd: ${SOAK_E2E_DURATION:-3m}"
	make -s build
	CRI_PROBER_E2E_SOAK="${SOAK_E2E_DURATION:-3m}" CRI_PROBER_E2E_SOAK_REPORT="$report" \
		hack/e2e.sh -run '^TestSoakOnContainerd$'
	echo "== a node kept: log rotation and container GC on a private containerd: ${SOAK_NODE_DURATION:-30m}"
	CRI_PROBER_E2E_NODE_SOAK="${SOAK_NODE_DURATION:-30m}" CRI_PROBER_E2E_SOAK_REPORT="$report" \
		hack/e2e.sh -run '^TestNodeSoakOnContainerd$' -timeout 90m
else
	echo "soak: not root, skipping the real-containerd soak" >&2
fi
[[ -n $report ]] && echo "soak: wrote $report"
