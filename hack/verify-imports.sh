#!/usr/bin/env bash
# Enforces the dependency direction of docs/architecture.md, from the
# commands down to the CRI boundary:
#   cmd -> agent -> api, hooks -> prober, restart -> lifecycle, pods
#       -> spec, exec, results -> cri, events
# pkg/probe, the probe kinds (HTTP, TCP, gRPC and the probe --debug
# transcript: kubelet's pkg/probe/*), is a leaf beside pkg/prober, the
# workers and their dispatcher: prober and lifecycle use it, and it
# imports nothing of ours but the leaves every layer may use. pkg/explain
# (cri-prober explain, pure) sits beside the outputs, for cmd: it reads
# restart's rules (the kill's grace period) where restart states them.
# pkg/podconfig (a Pod as kubelet's CRI configs, pure) imports pkg/spec only
# (and the leaves);
# pkg/podfs (the host side of the agent's own pods) imports pkg/podconfig,
# which states kubelet's rules and paths once for both, and pkg/spec;
# pkg/podmaker (the agent's static pods made: their host side, kubelet's
# image manager, their CRI configs) uses both, and pkg/restart for the
# interface pod sync declares (restart.Maker) and its back-off; pkg/restart,
# the pod sync, imports neither podfs, podconfig nor podmaker, and only
# pkg/agent wires the maker in.
# pkg/eviction (kubelet's eviction manager for local storage: the pods'
# limits, enforced on request, and node disk pressure) sits beside pod
# sync: it reads the pods' view (pkg/pods) and their specs, kubelet's
# paths (pkg/podconfig), measures through pkg/cri and records pkg/events;
# pod sync learns of an eviction through the view (pods.EvictionSource),
# and only pkg/agent wires it.
# pkg/imagegc (kubelet's image garbage collector: the node's images, the
# image filesystem) imports pkg/cri and pkg/events only; pkg/agent wires
# it in.
# pkg/killbudget (the node's restart budget and pause, with its state
# file) sits below pod sync, the prober and the API, which hold it: it
# imports pkg/events and the leaves only.
# pkg/spec (decoding, defaults, validation, policy: pure) imports
# pkg/results; pkg/manifests (the manifest directory, its watch and trust
# rules, the files the commands are given: kubelet's pkg/kubelet/config)
# reads files into pkg/spec and imports it alone, and the agent and the
# commands use it.
# pkg/node (the node learned from the host as kubelet learns it) imports
# pkg/podconfig, whose Node it gives out; the agent's commands and the
# startup bench use it. pkg/mountinfo (the kernel's mount table) is a leaf
# that podfs and node share. pkg/fswalk (walking a tree a workload built:
# bounded, by descriptors, never following a link) is a leaf that podfs
# (removing volumes) and eviction (measuring them) share.
# Nothing imports upward, packages of one layer do not import each other,
# and only tests use the fake runtime. pkg/bounded (cutting text a
# workload sent), pkg/credential (which header names carry credentials),
# pkg/statefile (the state directory's files and their one load/save
# policy, safe from links and crashes), pkg/pubsub (handing values on
# without blocking the writer: relists, pod views, probe results) and
# pkg/podip (a pod's addresses as kubelet sorts them, for pkg/cri and
# pkg/podconfig alike) are leaves that every layer may use. pkg/logs (the
# node's container log files: read for the logs command, those of the
# agent's containers rotated, the /var/log/containers links; pkg/agent
# wires its manager and links in) is a leaf beside the engine that imports
# at most pkg/cri. pkg/ledger (the restarts pod sync did, and why, kept under
# --state-dir) is a leaf too: its entry's cause is its own string, so it
# imports nothing of ours but pkg/statefile; pkg/restart records into it
# and pkg/api serves it. pkg/gc (kubelet's container garbage collection
# and the teardown of terminated pods, beside pod sync) imports pkg/pods
# and pkg/cri; it declares what it needs of the log files and the host
# side, and only pkg/agent wires them in. (Kubernetes' import-boss, at
# our scale.)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

module=$(go list -m)
# package (prefix) : internal packages it may import (prefixes)
allowed() {
  case $1 in
    pkg/cri/fakeruntime*) echo "pkg/cri" ;;
    test/target*) echo "" ;;
    pkg/bounded*|pkg/credential*|pkg/statefile*|pkg/pubsub*|pkg/podip*|pkg/cri*|pkg/events*) echo "" ;;
    pkg/results*) echo "" ;;
    pkg/ledger*) echo "" ;;
    pkg/killbudget*) echo "pkg/events" ;;
    pkg/imagegc*) echo "pkg/cri pkg/events" ;;
    pkg/exec*) echo "pkg/cri" ;;
    pkg/logs*) echo "pkg/cri" ;;
    pkg/spec*) echo "pkg/results" ;;
    pkg/manifests*) echo "pkg/spec" ;;
    pkg/podconfig*) echo "pkg/spec" ;;
    pkg/mountinfo*) echo "" ;;
    pkg/fswalk*) echo "" ;;
    pkg/node*) echo "pkg/podconfig pkg/mountinfo" ;;
    pkg/podfs*) echo "pkg/podconfig pkg/spec pkg/mountinfo pkg/fswalk" ;;
    pkg/pods*) echo "pkg/spec pkg/podconfig pkg/results pkg/cri pkg/events" ;;
    pkg/probe) echo "" ;;
    pkg/lifecycle*) echo "pkg/spec pkg/probe" ;;
    pkg/prober*) echo "pkg/prober pkg/probe pkg/pods pkg/spec pkg/results pkg/exec pkg/cri pkg/events" ;;
    pkg/restart*) echo "pkg/restart pkg/killbudget pkg/ledger pkg/lifecycle pkg/pods pkg/spec pkg/results pkg/cri pkg/events" ;;
    pkg/eviction*) echo "pkg/pods pkg/spec pkg/podconfig pkg/cri pkg/events pkg/fswalk" ;;
    pkg/gc*) echo "pkg/pods pkg/cri" ;;
    pkg/podmaker*) echo "pkg/restart pkg/pods pkg/podconfig pkg/podfs pkg/spec pkg/cri pkg/events" ;;
    pkg/api*) echo "pkg/killbudget pkg/pods pkg/spec pkg/ledger pkg/restart pkg/results pkg/cri pkg/events" ;;
    pkg/hooks*) echo "pkg/events" ;;
    pkg/explain*) echo "pkg/restart pkg/spec pkg/results" ;;
    pkg/agent*) echo "pkg/eviction pkg/api pkg/hooks pkg/logs pkg/prober pkg/imagegc pkg/podmaker pkg/gc pkg/restart pkg/killbudget pkg/ledger pkg/lifecycle pkg/pods pkg/podconfig pkg/podfs pkg/manifests pkg/spec pkg/exec pkg/results pkg/cri pkg/events" ;;
    # The startup floor makes kubelet's CRI configs of the same manifests.
    hack/tools/benchkubelet*) echo "pkg/cri pkg/podconfig pkg/node pkg/manifests pkg/spec" ;;
    hack/tools*) echo "pkg/cri" ;;
    test/harness*) echo "pkg" ;;
    cmd/*) echo "pkg" ;;
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
    [[ $dep == pkg/bounded && $rel != pkg/bounded* ]] && ok=1 # a leaf every layer uses
    [[ $dep == pkg/statefile && $rel != pkg/statefile* ]] && ok=1 # a leaf every layer uses
    [[ $dep == pkg/credential && $rel != pkg/credential* ]] && ok=1 # a leaf every layer uses
    [[ $dep == pkg/pubsub && $rel != pkg/pubsub* ]] && ok=1 # a leaf every layer uses
    [[ $dep == pkg/podip && $rel != pkg/podip* ]] && ok=1 # a leaf every layer uses
    for prefix in $(allowed "$rel"); do
      [[ $dep == "$prefix" || $dep == "$prefix"/* ]] && ok=1
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
((fail == 0)) && echo "imports follow cmd -> agent -> api/hooks, explain -> prober/restart -> lifecycle/pods -> probe, spec/exec/results -> cri/events"
exit $fail
