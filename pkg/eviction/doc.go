// Package eviction is kubelet's eviction manager for the pods the agent
// makes (pkg/kubelet/eviction), as far as local storage goes:
//
//   - local storage limits: with --local-storage-limits=enforce, a static
//     pod whose emptyDir passes its sizeLimit, whose container passes its
//     ephemeral-storage limit, or whose total passes its containers' limits
//     is evicted as kubelet evicts a pod that is not critical
//     (localStorageEviction): its Evicted event, kubelet's message and
//     metric, and pod sync kills it and leaves it Failed (pods.Inputs
//     Evicted, through the Manager as a pods.EvictionSource). By default
//     (ignore) nothing is evicted: kubelet never evicts a static pod, which
//     counts as critical, and pkg/spec warns about each such limit;
//   - node disk pressure: --eviction-hard's disk signals (nodefs on the
//     filesystem of --root-dir, imagefs on the runtime's image filesystem)
//     set the DiskPressure condition and, as kubelet does before evicting,
//     reclaim node-level resources first (container and image garbage
//     collection, through ContainerGC and ImageGC). No pod is evicted for
//     node pressure: every pod the agent makes is static, and kubelet
//     evicts no static pod for it either.
//
// The decisions are pure functions over measured figures and specs
// (LocalStorageEvictions, Thresholds.Met, Pressure.Observe); Manager
// measures (CRI container stats, a bounded walk of a volume's directory
// that never follows a link, taken at most once a minute per volume as
// kubelet's volume stats cache, statfs) and acts every 10 s (kubelet's
// evictionMonitoringPeriod), in kubelet's order: the pressure observed,
// then local storage limits; a round that evicts ends there, and the next
// waits for the evicted pods to be cleaned up (CleanedUp, up to 30 s).
//
// It imports pods (the view), spec, podconfig (kubelet's paths), cri and
// events, and the leaves.
package eviction
