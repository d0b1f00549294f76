#!/usr/bin/env bash
# make test: runs each stage (a make target) in order, stopping at the first
# that fails, and times it. The go test stages keep their `go test -json`
# events under $TEST_TIMINGS_DIR (default bin/test-timings); at the end the
# summary shows each stage's wall time beside the previous run's, the
# slowest packages and tests, and the count of tests passed and failed, so
# that the next slowdown is seen when it lands (issue 28). Each run is kept
# under $TEST_TIMINGS_HISTORY (default /var/tmp/cri-prober-test-timings,
# the last 20 runs), which outlives the clone CI runs in.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

export TEST_TIMINGS_DIR=${TEST_TIMINGS_DIR:-bin/test-timings}
history=${TEST_TIMINGS_HISTORY:-/var/tmp/cri-prober-test-timings}
rm -rf "$TEST_TIMINGS_DIR"
mkdir -p "$TEST_TIMINGS_DIR"
make --no-print-directory bin/testjson || exit 1

# run_stage runs one stage, or the stages of a group (joined by +) at the
# same time: a group's stages wait on the wall clock (a soak's minute, the
# containers of e2e) rather than the CPU, so that together they take the
# time of the longest.
run_stage() {
	local IFS=+ part rc=0
	local -a parts pids=()
	read -ra parts <<<"$1"
	if ((${#parts[@]} == 1)); then
		make --no-print-directory "$1"
		return
	fi
	for part in "${parts[@]}"; do
		make --no-print-directory "$part" &
		pids+=($!)
	done
	for part in "${pids[@]}"; do
		wait "$part" || rc=1
	done
	return $rc
}

status=0
for stage in "$@"; do
	start=$EPOCHREALTIME
	if run_stage "$stage"; then result=ok; else result=FAIL status=1; fi
	awk -v s="$stage" -v a="$start" -v b="$EPOCHREALTIME" -v r="$result" \
		'BEGIN { printf "%s\t%.1f\t%s\n", s, b - a, r }' >>"$TEST_TIMINGS_DIR/stages.tsv"
	[[ $status == 0 ]] || break
done

previous=$(ls -1d "$history"/*/ 2>/dev/null | sort | tail -n 1)
run="$history/$(date -u +%Y%m%dT%H%M%SZ)-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
if mkdir -p "$run" 2>/dev/null && cp "$TEST_TIMINGS_DIR"/* "$run"/; then
	ls -1d "$history"/*/ | sort | head -n -20 | xargs -r rm -rf
else
	echo "test: cannot keep this run's timings under $history" >&2
fi
bin/testjson summary ${previous:+-previous "${previous%/}"} "$TEST_TIMINGS_DIR"
exit $status
