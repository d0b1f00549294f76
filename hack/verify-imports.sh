#!/usr/bin/env bash
# Enforces the dependency direction of DEVELOPERS.md:
#   cmd -> restart/prober -> results/exec -> cri
# Packages in one layer do not import each other, nothing imports upward,
# and only tests use the fake runtime. pkg/events is a leaf that the prober
# and the restarter record into. (Kubernetes' import-boss, at our scale.)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

module=$(go list -m)
# package (prefix) : internal packages it may import (prefixes)
allowed() {
  case $1 in
    pkg/cri/fakeruntime*) echo "pkg/cri" ;;
    test/target*) echo "" ;;
    pkg/cri*|pkg/events*) echo "" ;;
    pkg/results*|pkg/exec*) echo "pkg/cri" ;;
    pkg/spec*) echo "pkg/results" ;;
    pkg/prober*) echo "pkg/prober pkg/spec pkg/results pkg/exec pkg/cri pkg/events" ;;
    pkg/restart*) echo "pkg/restart pkg/results pkg/cri pkg/events" ;;
    hack/tools*) echo "pkg/cri" ;;
    test/harness*) echo "pkg/" ;;
    pkg/api*) echo "pkg/cri pkg/events pkg/prober pkg/restart pkg/results" ;;
    pkg/hooks*) echo "pkg/events pkg/prober pkg/restart" ;;
    cmd/*) echo "pkg/" ;;
    *) echo "" ;;
  esac
}

fail=0
while read -r pkg imports; do
  rel=${pkg#"$module"/}
  for imp in $imports; do
    [[ $imp == "$module"/* ]] || continue
    dep=${imp#"$module"/}
    ok=0
    for prefix in $(allowed "$rel"); do
      [[ $dep == "$prefix"* ]] && ok=1
    done
    if [[ $dep == pkg/cri/fakeruntime* && $rel != pkg/cri/fakeruntime* ]]; then
      ok=0 # the fake runtime is for tests only
    fi
    if ((!ok)); then
      echo "import not allowed: $rel imports $dep" >&2
      fail=1
    fi
  done
done < <(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./...)
((fail == 0)) && echo "imports follow cmd -> restart/prober -> results/exec -> cri"
exit $fail
