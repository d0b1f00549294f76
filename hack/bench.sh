#!/usr/bin/env bash
# make bench: the Go benchmarks; the load harness (everything in one
# process) at 100 and 1,000 containers; the hostile targets; then the node
# cases of issue 15 (density, overload, cost per probe against a bare loop),
# the agent alone in a process of its own. Each case runs BENCH_RUNS times
# (default 3) and the report shows the spread. Writes docs/performance.md
# (its generated sections only) and docs/performance.png,
# docs/performance-node.png. About 10 minutes on the 2-core development
# machine; every size and duration is an environment variable (see
# test/bench/node_test.go: BENCH_*), e.g. for a quick check:
#   BENCH_RUNS=1 BENCH_SIZES=100 BENCH_DENSITY_SIZES=0,1000 BENCH_DENSITY_PERIOD=2 \
#   BENCH_OVERLOAD_PROBES=2000 BENCH_OVERLOAD_WINDOW=4s make bench
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || { echo "bench: Go is not installed (expected at /usr/local/go/bin/go)" >&2; exit 1; }
export BENCH_RUNS=${BENCH_RUNS:-3}

out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "== Go benchmarks"
go test -run '^$' -bench . -benchmem -count=1 ./pkg/cri ./pkg/probe | tee "$out"

# Exec probes against a bare ExecSync need a real containerd (root).
if [[ $EUID -eq 0 ]]; then
	echo "== exec probe vs bare ExecSync on a private containerd"
	hack/e2e.sh -run '^$' -bench BenchmarkExecProbe -benchtime 60x -count "$BENCH_RUNS" | tee -a "$out"
else
	echo "bench: not root, skipping the exec benchmark on real containerd" >&2
fi

echo "== load harness (${BENCH_SIZES:-100,1000} containers, $BENCH_RUNS runs)"
go test -tags bench -count=1 -timeout 30m -run '^TestLoad$' -v ./test/bench -args \
	-sizes "${BENCH_SIZES:-100,1000}" -runs "$BENCH_RUNS" -window "${BENCH_LOAD_WINDOW:-6s}" \
	-report "$PWD/docs/performance.md" -plot "$PWD/docs/performance.png" -benchmarks "$out"
echo "== hostile targets (one of each kind, beside 100 ordinary containers)"
go test -tags bench -count=1 -timeout 5m -run '^TestHostile$' -v ./test/bench -args -report "$PWD/docs/performance.md"
echo "== node cases (${BENCH_NODE_CASES:-density,overload,floor}, $BENCH_RUNS runs): the agent alone"
go test -tags bench -count=1 -timeout 60m -run '^TestNode$' -v ./test/bench -args \
	-node-report "$PWD/docs/performance.md" -benchmarks "$out"
echo "bench: wrote docs/performance.md, docs/performance.png and docs/performance-node.png"
