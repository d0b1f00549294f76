#!/usr/bin/env bash
# make bench: the Go benchmarks, then the load harness at 100, 1,000 and
# 10,000 containers; writes docs/performance.md and docs/performance.png.
# Takes about three minutes on the 2-core development machine.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || { echo "bench: Go is not installed (expected at /usr/local/go/bin/go)" >&2; exit 1; }

out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "== Go benchmarks"
go test -run '^$' -bench . -benchmem -count=1 ./pkg/cri ./pkg/prober/netprobe | tee "$out"

# Exec probes against a bare ExecSync need a real containerd (root).
if [[ $EUID -eq 0 ]]; then
	echo "== exec probe vs bare ExecSync on a private containerd"
	hack/e2e.sh -run '^$' -bench BenchmarkExecProbe -benchtime 60x -count 3 | tee -a "$out"
else
	echo "bench: not root, skipping the exec benchmark on real containerd" >&2
fi

echo "== load harness (${BENCH_SIZES:-100,1000,10000} containers)"
go test -tags bench -count=1 -timeout 20m -run '^TestLoad$' -v ./test/bench -args \
	-sizes "${BENCH_SIZES:-100,1000,10000}" \
	-report "$PWD/docs/performance.md" -plot "$PWD/docs/performance.png" -benchmarks "$out"
echo "== hostile targets (one of each kind, beside 100 ordinary containers)"
go test -tags bench -count=1 -timeout 5m -run '^TestHostile$' -v ./test/bench -args -report "$PWD/docs/performance.md"
echo "bench: wrote docs/performance.md and docs/performance.png"
