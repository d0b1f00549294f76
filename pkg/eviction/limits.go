package eviction

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cri-prober/cri-prober/pkg/spec"
)

// kubelet's eviction signals of a pod's local storage limits, the
// kubelet_evictions metric's eviction_signal label
// (eviction_manager.go).
const (
	SignalEmptyDirFsLimit           = "emptydirfs.limit"
	SignalEphemeralPodFsLimit       = "ephemeralpodfs.limit"
	SignalEphemeralContainerFsLimit = "ephemeralcontainerfs.limit"
)

// kubelet's eviction messages (helpers.go).
const (
	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q. "
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
)

// PodUsage is what a pod uses of local storage, as kubelet's summary
// measures it: each emptyDir's use (VolumeStats, du of its directory),
// each running container's writable layer (CRI ContainerStats) and logs
// (the files of its log directory), the pod's own log files and its
// etc-hosts. Volumes measured are those with a sizeLimit, and every
// disk-backed emptyDir when the pod has a total limit.
type PodUsage struct {
	// Pod is the pod as its manifest says (the spec's Object).
	Pod *corev1.Pod
	// Volumes is each measured emptyDir's bytes, by volume name.
	Volumes map[string]int64
	// Containers is each running container's use, by name.
	Containers map[string]ContainerUsage
	// PodLogs and EtcHosts are the pod's log files (outside its
	// containers' log directories) and its etc-hosts file, in bytes.
	PodLogs, EtcHosts int64
}

// ContainerUsage is a running container's local storage use, in bytes.
type ContainerUsage struct {
	// WritableLayer is its writable layer (kubelet's Rootfs of the
	// container: WritableLayer.UsedBytes).
	WritableLayer int64
	// Logs is its log files.
	Logs int64
}

// Eviction is a pod to evict, and why, as kubelet says it.
type Eviction struct {
	// Signal is the kubelet_evictions label (SignalEmptyDirFsLimit ...).
	Signal string
	// Message is kubelet's eviction message: the pod's status message
	// and its Evicted event's text.
	Message string
}

// LocalStorageEvictions is kubelet's localStorageEviction for one pod:
// the first of its emptyDirs past its sizeLimit, else its total past its
// containers' aggregate ephemeral-storage limit, else the first of its
// regular containers past its own limit. dedicatedImageFs leaves the
// writable layer out of a container's use, as kubelet does when the
// runtime's images are on another filesystem than its root directory.
// ok is false when nothing is past a limit.
func LocalStorageEvictions(u PodUsage, dedicatedImageFs bool) (Eviction, bool) {
	if e, ok := emptyDirLimitEviction(u); ok {
		return e, true
	}
	if e, ok := podEphemeralStorageLimitEviction(u); ok {
		return e, true
	}
	return containerEphemeralStorageLimitEviction(u, dedicatedImageFs)
}

// emptyDirLimitEviction: a volume whose use is greater than a positive
// sizeLimit (any medium: a Memory emptyDir's use is its tmpfs's).
func emptyDirLimitEviction(u PodUsage) (Eviction, bool) {
	for _, v := range u.Pod.Spec.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Sign() != 1 {
			continue
		}
		used, ok := u.Volumes[v.Name]
		if ok && resource.NewQuantity(used, resource.BinarySI).Cmp(*v.EmptyDir.SizeLimit) > 0 {
			return Eviction{Signal: SignalEmptyDirFsLimit, Message: fmt.Sprintf(emptyDirMessageFmt, v.Name, v.EmptyDir.SizeLimit.String())}, true
		}
	}
	return Eviction{}, false
}

// podEphemeralStorageLimitEviction: the pod's total (every running
// container's writable layer and logs, its disk-backed emptyDirs, its
// logs and etc-hosts: kubelet's calcEphemeralStorage) greater than its
// containers' aggregate limit (PodLimits: spec.ContainerLimits), when
// any container has one.
func podEphemeralStorageLimitEviction(u PodUsage) (Eviction, bool) {
	limit, ok := spec.ContainerLimits(u.Pod)[corev1.ResourceEphemeralStorage]
	if !ok {
		return Eviction{}, false
	}
	total := u.PodLogs + u.EtcHosts
	for _, c := range u.Containers {
		total += c.WritableLayer + c.Logs
	}
	for _, v := range u.Pod.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumDefault {
			total += u.Volumes[v.Name]
		}
	}
	if resource.NewQuantity(total, resource.BinarySI).Cmp(limit) > 0 {
		return Eviction{Signal: SignalEphemeralPodFsLimit, Message: fmt.Sprintf(podEphemeralStorageMessageFmt, limit.String())}, true
	}
	return Eviction{}, false
}

// containerEphemeralStorageLimitEviction: a regular container's logs
// (and writable layer, unless the image filesystem is dedicated) greater
// than its non-zero limit.
func containerEphemeralStorageLimitEviction(u PodUsage, dedicatedImageFs bool) (Eviction, bool) {
	for _, c := range u.Pod.Spec.Containers {
		limit := c.Resources.Limits.StorageEphemeral()
		use, running := u.Containers[c.Name]
		if limit.Value() == 0 || !running {
			continue
		}
		used := use.Logs
		if !dedicatedImageFs {
			used += use.WritableLayer
		}
		if limit.Cmp(*resource.NewQuantity(used, resource.BinarySI)) < 0 {
			return Eviction{Signal: SignalEphemeralContainerFsLimit, Message: fmt.Sprintf(containerEphemeralStorageMessageFmt, c.Name, limit.String())}, true
		}
	}
	return Eviction{}, false
}

// measuredVolumes are the emptyDirs of pod whose use matters: those with
// a positive sizeLimit, and every disk-backed one when the pod has a
// total limit. None: nothing to walk.
func measuredVolumes(pod *corev1.Pod) []corev1.Volume {
	_, total := spec.ContainerLimits(pod)[corev1.ResourceEphemeralStorage]
	var out []corev1.Volume
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil {
			continue
		}
		limited := v.EmptyDir.SizeLimit != nil && v.EmptyDir.SizeLimit.Sign() == 1
		if limited || total && v.EmptyDir.Medium == corev1.StorageMediumDefault {
			out = append(out, v)
		}
	}
	return out
}

// hasLocalStorageLimits reports whether the pod has anything
// LocalStorageEvictions may evict it for.
func hasLocalStorageLimits(pod *corev1.Pod) bool {
	if _, ok := spec.ContainerLimits(pod)[corev1.ResourceEphemeralStorage]; ok {
		return true
	}
	return len(measuredVolumes(pod)) > 0
}
