// Package results will own probe results per container ID and probe type,
// an update stream that never blocks a worker, and the per-container ready
// and started flags as kubelet's UpdatePodStatus computes them.
//
// Not implemented yet: see issue 3. It imports only cri.
package results
