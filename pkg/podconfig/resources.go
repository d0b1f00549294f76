package podconfig

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Kubelet's CPU and OOM constants (pkg/kubelet/cm, pkg/kubelet/qos).
const (
	minShares      = 2
	maxShares      = 262144
	sharesPerCPU   = 1024
	milliCPUToCPU  = 1000
	quotaPeriod    = 100000 // µs
	minQuotaPeriod = 1000   // µs

	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000

	systemNodeCritical     = "system-node-critical"
	systemCriticalPriority = 2000000000
)

// QOSClass is the pod's QoS class as kubelet computes it (GetPodQOS:
// status.qosClass when set, else ComputePodQOS, pod-level resources first
// when the pod has them).
func QOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	guaranteed := true
	add := func(list, more corev1.ResourceList) (found map[corev1.ResourceName]bool) {
		found = map[corev1.ResourceName]bool{}
		for name, q := range more {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				continue
			}
			if q.Sign() == 1 {
				found[name] = true
				if v, ok := list[name]; ok {
					d := q.DeepCopy()
					d.Add(v)
					list[name] = d
				} else {
					list[name] = q.DeepCopy()
				}
			}
		}
		return found
	}
	if r := pod.Spec.Resources; r != nil {
		if len(r.Requests) > 0 {
			add(requests, r.Requests)
		}
		if len(r.Limits) > 0 {
			found := add(limits, r.Limits)
			if !found[corev1.ResourceCPU] || !found[corev1.ResourceMemory] {
				guaranteed = false
			}
		}
	} else {
		for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range list {
				add(requests, list[i].Resources.Requests)
				found := add(limits, list[i].Resources.Limits)
				if !found[corev1.ResourceCPU] || !found[corev1.ResourceMemory] {
					guaranteed = false
				}
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// CgroupParent is the pod's cgroup as kubelet's pod container manager
// names it (GetPodContainerName): <root>/pod<uid> for Guaranteed pods,
// <root>/burstable/pod<uid> and <root>/besteffort/pod<uid> for the others,
// in the systemd driver's slice form when the node uses it. "" when the
// node has no CgroupRoot.
func CgroupParent(pod *corev1.Pod, node Node) string {
	return PodCgroupName(pod.UID, QOSClass(pod), node)
}

// PodCgroupName is CgroupParent for a pod known by its UID and QoS class:
// the cgroup a pod of that class had, for its cleanup once the pod is gone
// (kubelet's podContainerManager.Destroy of GetPodContainerName's name).
func PodCgroupName(uid types.UID, qos corev1.PodQOSClass, node Node) string {
	if node.CgroupRoot == "" {
		return ""
	}
	var parts []string
	for _, p := range strings.Split(node.CgroupRoot, "/") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	switch qos {
	case corev1.PodQOSBurstable:
		parts = append(parts, "burstable")
	case corev1.PodQOSBestEffort:
		parts = append(parts, "besteffort")
	}
	parts = append(parts, "pod"+string(uid))
	if node.CgroupDriver != "systemd" {
		return "/" + path.Join(parts...)
	}
	// CgroupName.ToSystemd: "-" becomes "_" in each part, then the slice
	// name expands to its parents: /a.slice/a-b.slice/a-b-c.slice.
	var out strings.Builder
	prefix := ""
	for _, p := range parts {
		p = strings.ReplaceAll(p, "-", "_")
		if prefix != "" {
			prefix += "-"
		}
		prefix += p
		out.WriteString("/" + prefix + ".slice")
	}
	return out.String()
}

// milliCPUToShares is cm.MilliCPUToShares.
func milliCPUToShares(milliCPU int64) int64 {
	if milliCPU == 0 {
		return minShares
	}
	shares := milliCPU * sharesPerCPU / milliCPUToCPU
	if shares < minShares {
		return minShares
	}
	if shares > maxShares {
		return maxShares
	}
	return shares
}

// milliCPUToQuota is cm.MilliCPUToQuota.
func milliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	q := milliCPU * period / milliCPUToCPU
	if q < minQuotaPeriod {
		return minQuotaPeriod
	}
	return q
}

// linuxResources is calculateLinuxResources: shares from the CPU request
// (the limit when no request is given), quota and period from the CPU
// limit, the memory limit, and memory.oom.group on cgroup v2 unless
// kubelet's singleProcessOOMKill. A CPU-manager static policy, which lifts
// the quota of exclusive CPUs, is not modelled: kubelet's default is none.
func linuxResources(cpuRequest, cpuLimit, memoryLimit *resource.Quantity, node Node) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	if cpuRequest == nil && cpuLimit != nil {
		r.CpuShares = milliCPUToShares(cpuLimit.MilliValue())
	} else {
		var m int64
		if cpuRequest != nil {
			m = cpuRequest.MilliValue()
		}
		r.CpuShares = milliCPUToShares(m)
	}
	if v := memoryLimit.Value(); v != 0 {
		r.MemoryLimitInBytes = v
	}
	if !node.NoCPUCFSQuota {
		period := int64(quotaPeriod)
		if node.CPUCFSQuotaPeriod > 0 {
			period = node.CPUCFSQuotaPeriod.Microseconds()
		}
		r.CpuQuota = milliCPUToQuota(cpuLimit.MilliValue(), period)
		r.CpuPeriod = period
	}
	if node.CgroupV2 && !node.SingleProcessOOMKill {
		r.Unified = map[string]string{"memory.oom.group": "1"}
	}
	return r
}

// containerResources is generateLinuxContainerResources: the CPU and
// memory of linuxResources (pod-level limits standing in for those the
// container lacks), oom_score_adj, huge page limits and no swap. Memory QoS
// (gate MemoryQoS) is off in 1.36; swap is kubelet's default NoSwap.
func containerResources(pod *corev1.Pod, c *corev1.Container, node Node) (*runtimeapi.LinuxContainerResources, error) {
	var cpuRequest *resource.Quantity
	if _, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		cpuRequest = c.Resources.Requests.Cpu()
	}
	cpuLimit, memLimit := c.Resources.Limits.Cpu(), c.Resources.Limits.Memory()
	if podLevelResourcesSet(pod) {
		if cpuLimit.IsZero() {
			cpuLimit = pod.Spec.Resources.Limits.Cpu()
		}
		if memLimit.IsZero() {
			memLimit = pod.Spec.Resources.Limits.Memory()
		}
	}
	r := linuxResources(cpuRequest, cpuLimit, memLimit, node)
	adj, err := oomScoreAdj(pod, c, node.MemoryCapacity)
	if err != nil {
		return nil, err
	}
	r.OomScoreAdj = adj
	r.HugepageLimits = hugepageLimits(pod, c, node.HugePageSizes)
	if node.SwapControllerAvailable {
		// ConfigureNoSwap.
		if node.CgroupV2 {
			if r.Unified == nil {
				r.Unified = map[string]string{}
			}
			r.Unified["memory.swap.max"] = "0"
		} else {
			r.MemorySwapLimitInBytes = r.MemoryLimitInBytes
		}
	}
	return r, nil
}

// podLevelResourcesSet is component-helpers' IsPodLevelResourcesSet.
func podLevelResourcesSet(pod *corev1.Pod) bool {
	r := pod.Spec.Resources
	if r == nil {
		return false
	}
	for _, list := range []corev1.ResourceList{r.Requests, r.Limits} {
		for name := range list {
			if spec.IsPodLevelResource(name) {
				return true
			}
		}
	}
	return false
}

// hasPodLevelLimits is component-helpers' IsPodLevelLimitsSet.
func hasPodLevelLimits(pod *corev1.Pod) bool {
	if pod.Spec.Resources == nil {
		return false
	}
	for name := range pod.Spec.Resources.Limits {
		if spec.IsPodLevelResource(name) {
			return true
		}
	}
	return false
}

func podLevelRequestsSet(pod *corev1.Pod) bool {
	if pod.Spec.Resources == nil {
		return false
	}
	for name := range pod.Spec.Resources.Requests {
		if spec.IsPodLevelResource(name) {
			return true
		}
	}
	return false
}

// hugepageLimits is GetHugepageLimitsFromResources: one limit per page
// size of the node, 0 unless the container (or, failing that, the pod)
// limits it.
func hugepageLimits(pod *corev1.Pod, c *corev1.Container, sizes []string) []*runtimeapi.HugepageLimit {
	var out []*runtimeapi.HugepageLimit
	for _, s := range sizes {
		out = append(out, &runtimeapi.HugepageLimit{PageSize: s})
	}
	want := map[string]uint64{}
	read := func(list corev1.ResourceList) {
		for name, q := range list {
			size, ok := strings.CutPrefix(string(name), corev1.ResourceHugePagesPrefix)
			if !ok {
				continue
			}
			pq, err := resource.ParseQuantity(size)
			if err != nil {
				continue
			}
			unit, err := hugePageUnitSize(pq.Value())
			if err != nil {
				continue
			}
			want[unit] = uint64(q.Value())
		}
	}
	if podLevelResourcesSet(pod) {
		read(pod.Spec.Resources.Limits)
	}
	read(c.Resources.Limits)
	for _, l := range out {
		if v, ok := want[l.PageSize]; ok {
			l.Limit = v
		}
	}
	return out
}

// hugePageUnitSize is v1helper.HugePageUnitSizeFromByteSize: 2097152 is
// "2MB", 1073741824 "1GB".
func hugePageUnitSize(size int64) (string, error) {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	i := 0
	for size%1024 == 0 && i < len(units)-1 {
		size /= 1024
		i++
	}
	if size > 1024 && i < len(units)-1 {
		return "", fmt.Errorf("size: %d%s must be guaranteed to divisible into the largest units", size, units[i])
	}
	return fmt.Sprintf("%d%s", size, units[i]), nil
}

// isCriticalPod is kubelet's IsCriticalPod: static and mirror pods, and
// pods of system-critical priority.
func isCriticalPod(pod *corev1.Pod) bool {
	if src, ok := pod.Annotations[spec.ConfigSourceAnnotation]; ok && src != "api" {
		return true
	}
	if _, ok := pod.Annotations["kubernetes.io/config.mirror"]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

// oomScoreAdj is qos.GetContainerOOMScoreAdjust.
func oomScoreAdj(pod *corev1.Pod, c *corev1.Container, memoryCapacity int64) (int64, error) {
	if isCriticalPod(pod) && pod.Spec.PriorityClassName == systemNodeCritical {
		return guaranteedOOMScoreAdj, nil
	}
	switch QOSClass(pod) {
	case corev1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj, nil
	case corev1.PodQOSBestEffort:
		return besteffortOOMScoreAdj, nil
	}
	if memoryCapacity <= 0 {
		return 0, fmt.Errorf("oom_score_adj of burstable container %q: the node's memory capacity is unknown", c.Name)
	}
	req := c.Resources.Requests.Memory().Value()
	var adj, remaining int64
	podReqs := podLevelRequestsSet(pod)
	if podReqs {
		remaining = remainingPodMemoryPerContainer(pod)
		adj = 1000 - (1000*(req+remaining))/memoryCapacity
	} else {
		adj = 1000 - (1000*req)/memoryCapacity
	}
	if isSidecarIn(pod, c) && len(pod.Spec.Containers) > 0 {
		// A sidecar is no likelier to be killed than the smallest regular
		// container.
		minReq := pod.Spec.Containers[0].Resources.Requests.Memory().Value()
		for _, rc := range pod.Spec.Containers[1:] {
			if v := rc.Resources.Requests.Memory().Value(); v < minReq {
				minReq = v
			}
		}
		if podReqs {
			minReq += remaining
		}
		if minAdj := 1000 - (1000*minReq)/memoryCapacity; adj > minAdj {
			adj = minAdj
		}
	}
	if adj < 1000+guaranteedOOMScoreAdj {
		return 1000 + guaranteedOOMScoreAdj, nil
	}
	if adj == besteffortOOMScoreAdj {
		return adj - 1, nil
	}
	return adj, nil
}

// remainingPodMemoryPerContainer is qos' remainingPodMemReqPerContainer.
func remainingPodMemoryPerContainer(pod *corev1.Pod) int64 {
	podReq := pod.Spec.Resources.Requests.Memory()
	if podReq.IsZero() {
		return 0
	}
	n := int64(len(pod.Spec.Containers) + len(pod.Spec.InitContainers))
	agg := spec.ContainerRequests(pod)
	return (podReq.Value() - agg.Memory().Value()) / n
}

// isSidecarIn is qos' isSidecarContainer: restartPolicy Always and listed
// among the init containers.
func isSidecarIn(pod *corev1.Pod, c *corev1.Container) bool {
	if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}

// podRequests and podLimits are component-helpers' PodRequests and
// PodLimits without overhead: the containers' aggregate, with pod-level
// values in place of the aggregate's where the pod sets them.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	reqs := spec.ContainerRequests(pod)
	if podLevelRequestsSet(pod) {
		for name, q := range pod.Spec.Resources.Requests {
			if spec.IsPodLevelResource(name) {
				reqs[name] = q
			}
		}
	}
	return reqs
}

func podLimits(pod *corev1.Pod) corev1.ResourceList {
	lims := spec.ContainerLimits(pod)
	if podLevelResourcesSet(pod) {
		for name, q := range pod.Spec.Resources.Limits {
			if spec.IsPodLevelResource(name) {
				lims[name] = q
			}
		}
	}
	return lims
}

// PodMemoryLimit is the memory limit in bytes kubelet sets on the pod's
// cgroup (cm.ResourceConfigForPod's Memory), 0 for none: a BestEffort pod
// has none, a Burstable pod one only when every container (each init
// container counted with the sidecars before it) has a memory limit or the
// pod has a pod-level one, a Guaranteed pod always; the limit is
// component-helpers' PodLimits, with the pod's overhead added. A
// memory-backed emptyDir is no larger (calculateEmptyDirMemorySize).
func PodMemoryLimit(pod *corev1.Pod) int64 {
	qos := QOSClass(pod)
	if qos == corev1.PodQOSBestEffort {
		return 0
	}
	// ResourceConfigForPod's ContainerFn over AggregateContainerLimits:
	// each regular container's limits, each init container's with the
	// restartable ones before it added.
	declared := true
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Resources.Limits.Memory().IsZero() {
			declared = false
		}
	}
	sidecars := resource.Quantity{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		lim := c.Resources.Limits.Memory().DeepCopy()
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars.Add(lim)
			lim = sidecars.DeepCopy()
		} else {
			lim.Add(sidecars)
		}
		if lim.IsZero() {
			declared = false
		}
	}
	if podLevelResourcesSet(pod) && !pod.Spec.Resources.Limits.Memory().IsZero() {
		declared = true
	}
	if qos == corev1.PodQOSBurstable && !declared {
		return 0
	}
	limit, ok := podLimits(pod)[corev1.ResourceMemory]
	if !ok {
		return 0
	}
	// PodLimits adds the overhead to a non-zero limit.
	if o, ok := pod.Spec.Overhead[corev1.ResourceMemory]; ok && !limit.IsZero() {
		limit.Add(o)
	}
	return limit.Value()
}

// sandboxResources is calculateSandboxResources (applySandboxResources):
// the pod's total requests and limits without overhead.
func sandboxResources(pod *corev1.Pod, node Node) *runtimeapi.LinuxContainerResources {
	req, lim := podRequests(pod), podLimits(pod)
	var cpuRequest *resource.Quantity
	if _, ok := req[corev1.ResourceCPU]; ok {
		cpuRequest = req.Cpu()
	}
	return linuxResources(cpuRequest, lim.Cpu(), lim.Memory(), node)
}

// sandboxOverhead is convertOverheadToLinuxResources: the pod's overhead
// as guaranteed resources, empty without overhead.
func sandboxOverhead(pod *corev1.Pod, node Node) *runtimeapi.LinuxContainerResources {
	if pod.Spec.Overhead == nil {
		return &runtimeapi.LinuxContainerResources{}
	}
	cpu, mem := pod.Spec.Overhead.Cpu(), pod.Spec.Overhead.Memory()
	return linuxResources(cpu, cpu, mem, node)
}
