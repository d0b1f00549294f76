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

for t in $targets; do
	pkg=${t%%:*} fn=${t##*:}
	echo "fuzz: $fn in $pkg for $fuzztime"
	go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$fuzztime" "$pkg"
done
