package spec

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Local storage limits (kubelet's LocalStorageCapacityIsolation): an
// emptyDir's sizeLimit and a container's ephemeral-storage limit are bound
// by kubelet's eviction manager alone, which evicts a pod past them. It
// never evicts a static pod (a static pod counts as critical: "cannot
// evict a critical pod", pkg/kubelet/eviction), so for the pods the agent
// makes these fields bind nothing, as under kubelet, unless the agent
// enforces them (run --local-storage-limits=enforce).
const (
	// LocalStorageIgnore is kubelet's outcome for a static pod, the
	// default: the limits bind nothing, and the manifest is warned about.
	LocalStorageIgnore = "ignore"
	// LocalStorageEnforce evicts a static pod past its limits as kubelet
	// evicts a pod that is not critical.
	LocalStorageEnforce = "enforce"
)

// localStorageWarnings says, for a static pod, which of its fields are
// local storage limits that bind nothing: a disk-backed emptyDir's
// sizeLimit (a Memory one sizes its tmpfs, which binds), each container's
// ephemeral-storage limit, or its request when it has no limit (a request
// only ranks pods for eviction), and a pod-level ephemeral-storage
// (which kubelet's pod-level resources ignore). With enforce, the limits
// do bind and only a request alone and the pod-level resource are warned
// about.
func localStorageWarnings(s *corev1.PodSpec, enforce bool) []containerWarning {
	const unbound = "kubelet never evicts a static pod (it counts as critical), so this limit binds nothing: the pod may write past it"
	const remedy = "; run the agent with --local-storage-limits=enforce to evict the pod past it as kubelet evicts a pod that is not critical, or remove it"
	var warnings []containerWarning
	warn := func(container string, fe *field.Error) {
		warnings = append(warnings, containerWarning{container, fe})
	}
	path := field.NewPath("spec")
	for i, v := range s.Volumes {
		if enforce || v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Sign() <= 0 || v.EmptyDir.Medium != corev1.StorageMediumDefault {
			continue
		}
		warn("", field.Invalid(path.Child("volumes").Index(i).Child("emptyDir", "sizeLimit"), v.EmptyDir.SizeLimit.String(),
			fmt.Sprintf("volume %q: %s%s", v.Name, unbound, remedy)))
	}
	for _, list := range []struct {
		field      string
		containers []corev1.Container
	}{{"initContainers", s.InitContainers}, {"containers", s.Containers}} {
		for i := range list.containers {
			c := &list.containers[i]
			cp := path.Child(list.field).Index(i).Child("resources")
			if q, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok && !enforce && !q.IsZero() {
				warn(c.Name, field.Invalid(cp.Child("limits").Key(string(corev1.ResourceEphemeralStorage)), q.String(), unbound+remedy))
			}
			if _, limited := c.Resources.Limits[corev1.ResourceEphemeralStorage]; limited {
				continue // its request defaults to the limit: the limit's warning says it
			}
			if q, ok := c.Resources.Requests[corev1.ResourceEphemeralStorage]; ok && !q.IsZero() {
				warn(c.Name, field.Invalid(cp.Child("requests").Key(string(corev1.ResourceEphemeralStorage)), q.String(),
					"binds nothing: kubelet ranks pods by it when the node is short of disk, and never evicts a static pod; a limit (limits.ephemeral-storage) bounds what the container writes"))
			}
		}
	}
	if r := s.Resources; r != nil {
		for _, l := range []struct {
			field string
			list  corev1.ResourceList
		}{{"limits", r.Limits}, {"requests", r.Requests}} {
			if q, ok := l.list[corev1.ResourceEphemeralStorage]; ok {
				warn("", field.Invalid(path.Child("resources", l.field).Key(string(corev1.ResourceEphemeralStorage)), q.String(),
					"ignored: pod-level resources take cpu, memory and hugepages only (kubelet's pod-level resources leave it out, the API server refuses it); set limits.ephemeral-storage on the containers"))
			}
		}
	}
	return warnings
}

// ReasonLocalStorageLimitIgnored is the event reason of a static pod's
// local storage limit that binds nothing (kubelet records none: it logs
// "cannot evict a critical pod" at each of its eviction manager's passes).
const ReasonLocalStorageLimitIgnored = "LocalStorageLimitIgnored"

// containerWarning is a warning and the container it is about ("": the
// pod).
type containerWarning struct {
	container string
	fe        *field.Error
}
