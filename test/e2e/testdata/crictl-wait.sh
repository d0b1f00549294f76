#!/usr/bin/env bash
# What a CI harness does: create a pod and its container with crictl, then
# gate on cri-prober before using it. Arguments: the pod config, the
# container config, NAMESPACE/NAME, the wait timeout.
set -euo pipefail
pod_json=$1 ctr_json=$2 pod_ref=$3 timeout=$4
pod=$("$CRICTL" runp "$pod_json")
ctr=$("$CRICTL" create "$pod" "$ctr_json" "$pod_json")
"$CRICTL" start "$ctr" >/dev/null
"$CRI_PROBER" wait --for ready --pod "$pod_ref" --timeout "$timeout"
