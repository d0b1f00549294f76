// Package prober will own the probe workers: one per (pod, container, probe
// type) with kubelet's decision sequence (initial delay, period, timeout,
// thresholds, startup gating, hold after failure), the HTTP, TCP and gRPC
// probe kinds, and the probe specs read from Pod manifests and annotations.
//
// Not implemented yet: see issue 3. It may import results, exec and cri,
// never restart.
package prober
