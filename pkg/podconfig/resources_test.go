package podconfig

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func qp(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// Rows of kubelet's TestCalculateLinuxResources.
func TestLinuxResources(t *testing.T) {
	v1, v2 := Node{}, Node{CgroupV2: true}
	for _, tc := range []struct {
		name                   string
		cpuReq, cpuLim, memLim *resource.Quantity
		node                   Node
		want                   *runtimeapi.LinuxContainerResources
	}{
		{"Request128MBLimit256MB", qp("1"), qp("2"), qp("128Mi"), v1,
			&runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 200000, CpuShares: 1024, MemoryLimitInBytes: 134217728}},
		{"RequestNoMemory", qp("2"), qp("8"), qp("0"), v1,
			&runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 800000, CpuShares: 2048}},
		{"RequestNilCPU", nil, qp("2"), qp("0"), v1,
			&runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 200000, CpuShares: 2048}},
		{"RequestZeroCPU", qp("0"), qp("2"), qp("0"), v1,
			&runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 200000, CpuShares: 2}},
		{"Request128MBLimit256MB v2", qp("1"), qp("2"), qp("128Mi"), v2,
			&runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 200000, CpuShares: 1024, MemoryLimitInBytes: 134217728, Unified: map[string]string{"memory.oom.group": "1"}}},
		{"Request128MBLimit256MBSingleProcess", qp("1"), qp("2"), qp("128Mi"), Node{CgroupV2: true, SingleProcessOOMKill: true},
			&runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 200000, CpuShares: 1024, MemoryLimitInBytes: 134217728}},
		{"no CFS quota", qp("1"), qp("2"), qp("0"), Node{NoCPUCFSQuota: true},
			&runtimeapi.LinuxContainerResources{CpuShares: 1024}},
		{"CFS period 50ms", qp("1"), qp("2"), qp("0"), Node{CPUCFSQuotaPeriod: 50 * time.Millisecond},
			&runtimeapi.LinuxContainerResources{CpuPeriod: 50000, CpuQuota: 100000, CpuShares: 1024}},
		{"minimal quota", qp("1m"), qp("1m"), qp("0"), v1,
			&runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 1000, CpuShares: 2}},
		{"shares capped", qp("300"), qp("0"), qp("0"), v1,
			&runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuShares: 262144}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := linuxResources(tc.cpuReq, tc.cpuLim, tc.memLim, tc.node)
			if !proto.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func resourcesPod(containers, inits []corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "12345678"}, Spec: corev1.PodSpec{Containers: containers, InitContainers: inits}}
}

func res(limits, requests map[corev1.ResourceName]string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{}
	for k, v := range limits {
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		r.Limits[k] = resource.MustParse(v)
	}
	for k, v := range requests {
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[k] = resource.MustParse(v)
	}
	return r
}

// Rows of pkg/apis/core/v1/helper/qos's TestComputePodQOS.
func TestQOSClass(t *testing.T) {
	cpu, mem := corev1.ResourceCPU, corev1.ResourceMemory
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{"best effort", resourcesPod([]corev1.Container{{}}, nil), corev1.PodQOSBestEffort},
		{"best effort with zero requests", resourcesPod([]corev1.Container{{Resources: res(nil, map[corev1.ResourceName]string{cpu: "0"})}}, nil), corev1.PodQOSBestEffort},
		{"best effort ignores other resources", resourcesPod([]corev1.Container{{Resources: res(map[corev1.ResourceName]string{"nvidia.com/gpu": "1"}, nil)}}, nil), corev1.PodQOSBestEffort},
		{"guaranteed", resourcesPod([]corev1.Container{
			{Resources: res(map[corev1.ResourceName]string{cpu: "100m", mem: "100Mi"}, map[corev1.ResourceName]string{cpu: "100m", mem: "100Mi"})},
			{Resources: res(map[corev1.ResourceName]string{cpu: "1", mem: "1Gi"}, map[corev1.ResourceName]string{cpu: "1", mem: "1Gi"})},
		}, nil), corev1.PodQOSGuaranteed},
		{"burstable: limits differ from requests", resourcesPod([]corev1.Container{
			{Resources: res(map[corev1.ResourceName]string{cpu: "100m", mem: "100Mi"}, map[corev1.ResourceName]string{cpu: "10m", mem: "100Mi"})},
		}, nil), corev1.PodQOSBurstable},
		{"burstable: one container without limits", resourcesPod([]corev1.Container{
			{Resources: res(map[corev1.ResourceName]string{cpu: "100m", mem: "100Mi"}, map[corev1.ResourceName]string{cpu: "100m", mem: "100Mi"})},
			{},
		}, nil), corev1.PodQOSBurstable},
		{"burstable: init container", resourcesPod([]corev1.Container{
			{Resources: res(map[corev1.ResourceName]string{cpu: "100m", mem: "100Mi"}, map[corev1.ResourceName]string{cpu: "100m", mem: "100Mi"})},
		}, []corev1.Container{{Resources: res(nil, map[corev1.ResourceName]string{mem: "1Mi"})}}), corev1.PodQOSBurstable},
		{"pod-level guaranteed", func() *corev1.Pod {
			p := resourcesPod([]corev1.Container{{}}, nil)
			p.Spec.Resources = &corev1.ResourceRequirements{
				Limits: corev1.ResourceList{cpu: resource.MustParse("1"), mem: resource.MustParse("1Gi")}, Requests: corev1.ResourceList{cpu: resource.MustParse("1"), mem: resource.MustParse("1Gi")}}
			return p
		}(), corev1.PodQOSGuaranteed},
		{"pod-level wins over containers", func() *corev1.Pod {
			p := resourcesPod([]corev1.Container{{Resources: res(map[corev1.ResourceName]string{cpu: "100m"}, nil)}}, nil)
			p.Spec.Resources = &corev1.ResourceRequirements{}
			return p
		}(), corev1.PodQOSBestEffort},
		{"status wins", func() *corev1.Pod { p := resourcesPod(nil, nil); p.Status.QOSClass = corev1.PodQOSGuaranteed; return p }(), corev1.PodQOSGuaranteed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := QOSClass(tc.pod); got != tc.want {
				t.Errorf("QOSClass = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCgroupParent(t *testing.T) {
	guaranteed := resourcesPod([]corev1.Container{{Resources: res(map[corev1.ResourceName]string{"cpu": "1", "memory": "1Gi"}, map[corev1.ResourceName]string{"cpu": "1", "memory": "1Gi"})}}, nil)
	burstable := resourcesPod([]corev1.Container{{Resources: res(nil, map[corev1.ResourceName]string{"cpu": "1"})}}, nil)
	besteffort := resourcesPod([]corev1.Container{{}}, nil)
	besteffort.UID = "a-b-c"
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		node Node
		want string
	}{
		{"unset", burstable, Node{}, ""},
		{"guaranteed", guaranteed, Node{CgroupRoot: "/kubepods"}, "/kubepods/pod12345678"},
		{"burstable", burstable, Node{CgroupRoot: "/kubepods"}, "/kubepods/burstable/pod12345678"},
		{"besteffort", besteffort, Node{CgroupRoot: "/kubepods/"}, "/kubepods/besteffort/poda-b-c"},
		{"nested root", burstable, Node{CgroupRoot: "/custom/kubepods"}, "/custom/kubepods/burstable/pod12345678"},
		{"systemd", besteffort, Node{CgroupRoot: "/kubepods", CgroupDriver: "systemd"}, "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-poda_b_c.slice"},
		{"systemd guaranteed", guaranteed, Node{CgroupRoot: "/kubepods", CgroupDriver: "systemd"}, "/kubepods.slice/kubepods-pod12345678.slice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CgroupParent(tc.pod, tc.node); got != tc.want {
				t.Errorf("CgroupParent = %q, want %q", got, tc.want)
			}
		})
	}
}

// Rows of pkg/kubelet/qos's TestGetContainerOOMScoreAdjust (memory
// capacity 4000000000).
func TestOOMScoreAdj(t *testing.T) {
	const capacity = 4000000000
	mem := corev1.ResourceMemory
	burstable := func(req string) *corev1.Pod {
		return resourcesPod([]corev1.Container{{Resources: res(map[corev1.ResourceName]string{mem: "10G"}, map[corev1.ResourceName]string{mem: req})}}, nil)
	}
	critical := resourcesPod([]corev1.Container{{}}, nil)
	critical.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	critical.Spec.PriorityClassName = "system-node-critical"
	staticOnly := resourcesPod([]corev1.Container{{}}, nil)
	staticOnly.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	sidecar := resourcesPod(
		[]corev1.Container{{Name: "a", Resources: res(nil, map[corev1.ResourceName]string{mem: "1G"})}, {Name: "b", Resources: res(nil, map[corev1.ResourceName]string{mem: "2G"})}},
		[]corev1.Container{{Name: "s", RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways), Resources: res(nil, map[corev1.ResourceName]string{mem: "100M"})}})
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		c    *corev1.Container
		want int64
	}{
		{"best effort", resourcesPod([]corev1.Container{{}}, nil), nil, 1000},
		{"guaranteed", resourcesPod([]corev1.Container{{Resources: res(map[corev1.ResourceName]string{mem: "10G", "cpu": "1"}, map[corev1.ResourceName]string{mem: "10G", "cpu": "1"})}}, nil), nil, -997},
		{"burstable 3/4 of memory", burstable("3G"), nil, 250},
		{"burstable beyond capacity", burstable("10G"), nil, 3},
		{"burstable tiny request", burstable("1"), nil, 999},
		{"node critical static pod", critical, nil, -997},
		{"static but not node critical", staticOnly, nil, 1000},
		{"sidecar no likelier than the smallest", sidecar, &sidecar.Spec.InitContainers[0], 750},
		{"regular container", sidecar, &sidecar.Spec.Containers[1], 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			if c == nil {
				c = &tc.pod.Spec.Containers[0]
			}
			got, err := oomScoreAdj(tc.pod, c, capacity)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("oomScoreAdj = %d, want %d", got, tc.want)
			}
		})
	}
	if _, err := oomScoreAdj(burstable("1G"), &burstable("1G").Spec.Containers[0], 0); err == nil {
		t.Error("no error without the node's memory capacity")
	}
}

// Rows of kubelet's TestGetHugepageLimitsFromResources.
func TestHugepageLimits(t *testing.T) {
	sizes := []string{"2MB", "1GB"}
	for _, tc := range []struct {
		name   string
		limits map[corev1.ResourceName]string
		podLim map[corev1.ResourceName]string
		want   []*runtimeapi.HugepageLimit
	}{
		{"none", nil, nil, []*runtimeapi.HugepageLimit{{PageSize: "2MB"}, {PageSize: "1GB"}}},
		{"2Mi", map[corev1.ResourceName]string{"hugepages-2Mi": "4Mi"}, nil, []*runtimeapi.HugepageLimit{{PageSize: "2MB", Limit: 4194304}, {PageSize: "1GB"}}},
		{"1Gi", map[corev1.ResourceName]string{"hugepages-1Gi": "2Gi"}, nil, []*runtimeapi.HugepageLimit{{PageSize: "2MB"}, {PageSize: "1GB", Limit: 2147483648}}},
		{"unsupported size ignored", map[corev1.ResourceName]string{"hugepages-64Ki": "1Mi"}, nil, []*runtimeapi.HugepageLimit{{PageSize: "2MB"}, {PageSize: "1GB"}}},
		{"pod level, container wins", map[corev1.ResourceName]string{"hugepages-2Mi": "4Mi"}, map[corev1.ResourceName]string{"hugepages-2Mi": "8Mi", "hugepages-1Gi": "1Gi"},
			[]*runtimeapi.HugepageLimit{{PageSize: "2MB", Limit: 4194304}, {PageSize: "1GB", Limit: 1073741824}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := resourcesPod([]corev1.Container{{Resources: res(tc.limits, nil)}}, nil)
			if tc.podLim != nil {
				r := res(tc.podLim, nil)
				pod.Spec.Resources = &r
			}
			got := hugepageLimits(pod, &pod.Spec.Containers[0], sizes)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if !proto.Equal(got[i], tc.want[i]) {
					t.Errorf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestContainerResourcesSwapAndPodLevel(t *testing.T) {
	pod := resourcesPod([]corev1.Container{{Resources: res(map[corev1.ResourceName]string{"memory": "1Gi"}, nil)}}, nil)
	node := Node{MemoryCapacity: 8 << 30, CgroupV2: true, SwapControllerAvailable: true}
	r, err := containerResources(pod, &pod.Spec.Containers[0], node)
	if err != nil {
		t.Fatal(err)
	}
	if r.Unified["memory.swap.max"] != "0" || r.Unified["memory.oom.group"] != "1" {
		t.Errorf("cgroup v2 NoSwap: unified %v", r.Unified)
	}
	node.CgroupV2 = false
	r, _ = containerResources(pod, &pod.Spec.Containers[0], node)
	if r.MemorySwapLimitInBytes != 1<<30 || r.Unified != nil {
		t.Errorf("cgroup v1 NoSwap: swap %d, unified %v", r.MemorySwapLimitInBytes, r.Unified)
	}
	// Pod-level limits stand in for the container's.
	pod.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	r, _ = containerResources(pod, &pod.Spec.Containers[0], Node{MemoryCapacity: 8 << 30})
	if r.CpuQuota != 200000 || r.MemoryLimitInBytes != 1<<30 {
		t.Errorf("pod-level cpu limit: quota %d memory %d", r.CpuQuota, r.MemoryLimitInBytes)
	}
}

func TestSandboxResources(t *testing.T) {
	pod := resourcesPod(
		[]corev1.Container{
			{Resources: res(map[corev1.ResourceName]string{"cpu": "1", "memory": "1Gi"}, map[corev1.ResourceName]string{"cpu": "500m", "memory": "1Gi"})},
			{Resources: res(map[corev1.ResourceName]string{"cpu": "1"}, map[corev1.ResourceName]string{"cpu": "1"})},
		},
		[]corev1.Container{{Resources: res(map[corev1.ResourceName]string{"cpu": "4"}, map[corev1.ResourceName]string{"cpu": "4"})}})
	pod.Spec.Overhead = corev1.ResourceList{"cpu": resource.MustParse("250m"), "memory": resource.MustParse("120Mi")}
	got := sandboxResources(pod, Node{})
	want := &runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 400000, CpuShares: 4096, MemoryLimitInBytes: 1 << 30}
	if !proto.Equal(got, want) {
		t.Errorf("resources %v, want %v", got, want)
	}
	gotO := sandboxOverhead(pod, Node{})
	wantO := &runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 25000, CpuShares: 256, MemoryLimitInBytes: 120 << 20}
	if !proto.Equal(gotO, wantO) {
		t.Errorf("overhead %v, want %v", gotO, wantO)
	}
	if o := sandboxOverhead(resourcesPod(nil, nil), Node{}); !proto.Equal(o, &runtimeapi.LinuxContainerResources{}) {
		t.Errorf("no overhead: %v", o)
	}
}

// podMemoryLimitCases are pods and the memory limit kubelet v1.36.3's
// cm.ResourceConfigForPod gives their cgroup (recorded from it: set
// PODCONFIG_MEMLIMIT_DUMP=file to write the pods as JSON for such a run).
func podMemoryLimitCases() []struct {
	name string
	pod  *corev1.Pod
	want int64
} {
	mem := corev1.ResourceMemory
	lim := func(m string) corev1.ResourceRequirements {
		return res(map[corev1.ResourceName]string{mem: m}, nil)
	}
	guaranteed := func(m string) corev1.ResourceRequirements {
		return res(map[corev1.ResourceName]string{mem: m, "cpu": "1"}, map[corev1.ResourceName]string{mem: m, "cpu": "1"})
	}
	sidecar := func(name, m string) corev1.Container {
		return corev1.Container{Name: name, RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways), Resources: lim(m)}
	}
	withOverhead := resourcesPod([]corev1.Container{{Name: "a", Resources: guaranteed("1Gi")}}, nil)
	withOverhead.Spec.Overhead = corev1.ResourceList{mem: resource.MustParse("128Mi"), "cpu": resource.MustParse("250m")}
	overheadNoLimit := resourcesPod([]corev1.Container{{Name: "a", Resources: res(nil, map[corev1.ResourceName]string{mem: "1Gi"})}}, nil)
	overheadNoLimit.Spec.Overhead = corev1.ResourceList{mem: resource.MustParse("128Mi")}
	podLevel := resourcesPod([]corev1.Container{{Name: "a"}, {Name: "b", Resources: lim("1Gi")}}, nil)
	podLevel.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{mem: resource.MustParse("3Gi")}}
	podLevelCPU := resourcesPod([]corev1.Container{{Name: "a"}, {Name: "b", Resources: lim("1Gi")}}, nil)
	podLevelCPU.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": resource.MustParse("2")}}
	return []struct {
		name string
		pod  *corev1.Pod
		want int64
	}{
		{"best effort", resourcesPod([]corev1.Container{{Name: "a"}}, nil), 0},
		{"guaranteed", resourcesPod([]corev1.Container{{Name: "a", Resources: guaranteed("1Gi")}, {Name: "b", Resources: guaranteed("512Mi")}}, nil), 1536 << 20},
		{"burstable, every container limited", resourcesPod([]corev1.Container{{Name: "a", Resources: lim("1Gi")}, {Name: "b", Resources: lim("256Mi")}}, nil), 1280 << 20},
		{"burstable, a container unlimited", resourcesPod([]corev1.Container{{Name: "a", Resources: lim("1Gi")}, {Name: "b", Resources: res(nil, map[corev1.ResourceName]string{mem: "1Mi"})}}, nil), 0},
		{"burstable, an init container unlimited", resourcesPod([]corev1.Container{{Name: "a", Resources: lim("1Gi")}}, []corev1.Container{{Name: "i", Resources: res(nil, map[corev1.ResourceName]string{"cpu": "1"})}}), 0},
		{"init container larger than the containers", resourcesPod([]corev1.Container{{Name: "a", Resources: lim("1Gi")}}, []corev1.Container{{Name: "i", Resources: lim("3Gi")}}), 3 << 30},
		{"sidecar counted with the containers", resourcesPod([]corev1.Container{{Name: "a", Resources: lim("1Gi")}}, []corev1.Container{sidecar("s", "512Mi")}), 1536 << 20},
		// An init container without a limit after a sidecar has the
		// sidecar's: declared.
		{"init container after a sidecar", resourcesPod([]corev1.Container{{Name: "a", Resources: lim("1Gi")}}, []corev1.Container{sidecar("s", "512Mi"), {Name: "i", Resources: res(nil, map[corev1.ResourceName]string{"cpu": "1"})}}), 1536 << 20},
		{"overhead added", withOverhead, 1152 << 20},
		{"overhead, no limit", overheadNoLimit, 0},
		{"pod-level limit", podLevel, 3 << 30},
		{"pod-level cpu limit only", podLevelCPU, 0},
	}
}

func TestPodMemoryLimit(t *testing.T) {
	cases := podMemoryLimitCases()
	if path := os.Getenv("PODCONFIG_MEMLIMIT_DUMP"); path != "" {
		pods := map[string]*corev1.Pod{}
		for _, tc := range cases {
			pods[tc.name] = tc.pod
		}
		data, err := json.MarshalIndent(pods, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodMemoryLimit(tc.pod); got != tc.want {
				t.Errorf("PodMemoryLimit = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPodCgroupName(t *testing.T) {
	for _, tc := range []struct {
		name string
		qos  corev1.PodQOSClass
		node Node
		want string
	}{
		{"no cgroup root", corev1.PodQOSBurstable, Node{}, ""},
		{"guaranteed", corev1.PodQOSGuaranteed, Node{CgroupRoot: "/kubepods"}, "/kubepods/poda-b"},
		{"burstable", corev1.PodQOSBurstable, Node{CgroupRoot: "/kubepods"}, "/kubepods/burstable/poda-b"},
		{"besteffort", corev1.PodQOSBestEffort, Node{CgroupRoot: "/kubepods"}, "/kubepods/besteffort/poda-b"},
		{"systemd", corev1.PodQOSBurstable, Node{CgroupRoot: "/kubepods", CgroupDriver: "systemd"}, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poda_b.slice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodCgroupName("a-b", tc.qos, tc.node); got != tc.want {
				t.Errorf("PodCgroupName = %q, want %q", got, tc.want)
			}
		})
	}
}
