// Package restart will own acting on probe results: stopping containers
// that failed liveness or startup probes with kubelet's grace period,
// re-creating them per restart policy, and kubelet's CrashLoopBackOff.
//
// Not implemented yet: see issue 4. It may import results and cri, never
// prober or exec.
package restart
