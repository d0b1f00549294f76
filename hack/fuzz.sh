#!/usr/bin/env bash
# Runs every fuzz target for FUZZTIME each (default 10s; make test uses 5s).
# A crasher is written under the package's testdata/fuzz/ and then replayed
# by plain `go test` forever after: commit it with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
fuzztime=${FUZZTIME:-10s}

# package:target, found rather than listed so a new fuzzer is never skipped.
targets=$(grep -rl --include='*_test.go' '^func Fuzz' cmd pkg | while read -r f; do
	for fn in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | cut -d' ' -f2); do
		echo "./$(dirname "$f"):$fn"
	done
done | sort)

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# deadline_race tells Go's own fuzz-coordinator race (golang/go#75804, fixed
# in Go 1.27) from a finding: when -fuzztime expires while a worker is
# mid-input, go1.26 reports a bare "context deadline exceeded" and writes no
# reproducer. Anything else (a panic, a t.Error, a written input) is real.
deadline_race() {
	grep -q 'context deadline exceeded' "$log" &&
		! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' "$log"
}

for t in $targets; do
	pkg=${t%%:*} fn=${t##*:}
	for attempt in 1 2; do
		echo "fuzz: $fn in $pkg for $fuzztime"
		if go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log"; then
			break
		fi
		if deadline_race && [ "$attempt" = 1 ]; then
			echo "fuzz: $fn hit Go's fuzztime shutdown race (golang/go#75804), no input written; running it again"
			continue
		fi
		if deadline_race; then
			echo "fuzz: $fn hit Go's fuzztime shutdown race twice, no input written; not a finding"
			break
		fi
		exit 1
	done
done
