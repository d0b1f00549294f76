package podconfig

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cri-prober/cri-prober/pkg/spec"
)

func ptr[T any](v T) *T { return &v }

// testSeen is the first-seen time of the test static pods.
var testSeen = time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC)

// static applies the API defaults and the static identity of a manifest
// read from /etc/kubernetes/manifests on node "node-a".
func static(p *corev1.Pod) *corev1.Pod {
	spec.StaticPod(p, "node-a", "/etc/kubernetes/manifests/"+p.Name+".yaml", testSeen)
	return p
}

// goldenPod is the representative static pod: an init container, a
// sidecar and two containers, env of every kind, emptyDir, hostPath and
// downwardAPI volumes with subPath and subPathExpr, security contexts,
// resources, ports with hostPort, a dnsConfig and host aliases.
func goldenPod() *corev1.Pod {
	q := resource.MustParse
	return static(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "web",
			Namespace:   "shop",
			UID:         "6f1c2c9a-31b5-4a8e-9d2e-0c6a5b7d8e9f",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"team": "payments"},
		},
		Spec: corev1.PodSpec{
			Hostname:  "web-0",
			Subdomain: "web",
			DNSConfig: &corev1.PodDNSConfig{
				Nameservers: []string{"192.0.2.53"},
				Searches:    []string{"corp.example"},
				Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}, {Name: "edns0"}},
			},
			HostAliases: []corev1.HostAlias{{IP: "192.0.2.10", Hostnames: []string{"db", "db.local"}}},
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser:          ptr(int64(1000)),
				RunAsGroup:         ptr(int64(3000)),
				FSGroup:            ptr(int64(2000)),
				SupplementalGroups: []int64{4000, 5000},
				Sysctls:            []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}, {Name: "net/ipv4/conf/eth0.100/rp_filter", Value: "1"}},
				SeccompProfile:     &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			TerminationGracePeriodSeconds: ptr(int64(45)),
			Volumes: []corev1.Volume{
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log/web"}}},
				{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
					{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu", Divisor: q("1m")}},
				}}}},
			},
			InitContainers: []corev1.Container{
				{
					Name:    "setup",
					Image:   "busybox:1.36",
					Command: []string{"sh", "-c", "echo $(GREETING) > /cache/hello"},
					Env:     []corev1.EnvVar{{Name: "GREETING", Value: "hi"}},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "cache", MountPath: "/cache"},
					},
				},
				{
					Name:          "proxy",
					Image:         "registry.example/proxy@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
					RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways),
					Ports:         []corev1.ContainerPort{{Name: "admin", ContainerPort: 9901}},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceMemory: q("32Mi"), corev1.ResourceCPU: q("50m")},
					},
					SecurityContext: &corev1.SecurityContext{
						Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"ALL"}},
					},
				},
			},
			Containers: []corev1.Container{
				{
					Name:       "app",
					Image:      "registry.example/web:2.4",
					Command:    []string{"/bin/web"},
					Args:       []string{"--port=$(PORT)", "--node=$(NODE)", "--escaped=$$(PORT)", "--missing=$(NOPE)"},
					WorkingDir: "/srv",
					Ports: []corev1.ContainerPort{
						{Name: "http", ContainerPort: 8080, HostPort: 30080, HostIP: "127.0.0.1"},
						{ContainerPort: 8443, Protocol: corev1.ProtocolUDP},
					},
					Env: []corev1.EnvVar{
						{Name: "PORT", Value: "8080"},
						{Name: "URL", Value: "http://localhost:$(PORT)/"},
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						{Name: "POD_NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
						{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
						{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
						{Name: "TEAM", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['team']"}}},
						{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
						{Name: "SA", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}},
						{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
						{Name: "HOST_IPS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIPs"}}},
						{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
						{Name: "POD_IPS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIPs"}}},
						{Name: "CPU_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: q("1m")}}},
						{Name: "MEM_LIMIT_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: q("1Mi")}}},
						{Name: "MEM_REQUEST", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.memory"}}},
						{Name: "WORKER_CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "worker", Resource: "limits.cpu"}}},
						{Name: "EMPTY"},
					},
					Resources: corev1.ResourceRequirements{
						Limits:   corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("256Mi")},
						Requests: corev1.ResourceList{corev1.ResourceCPU: q("250m"), corev1.ResourceMemory: q("128Mi")},
					},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "cache", MountPath: "/cache", ReadOnly: true},
						{Name: "logs", MountPath: "/var/log/app", SubPathExpr: "$(POD_NAME)", MountPropagation: ptr(corev1.MountPropagationHostToContainer)},
						{Name: "info", MountPath: "/etc/podinfo"},
					},
					LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}},
					Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
						HTTPGet: &corev1.HTTPGetAction{Path: "/drain", Port: intstr.FromInt32(8080)},
					}},
					SecurityContext: &corev1.SecurityContext{
						AllowPrivilegeEscalation: ptr(false),
						ReadOnlyRootFilesystem:   ptr(true),
						RunAsNonRoot:             ptr(true),
						SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr("profiles/web.json")},
					},
				},
				{
					Name:                     "worker",
					Image:                    "registry.example/worker",
					Args:                     []string{"--queue", "jobs"},
					Stdin:                    true,
					StdinOnce:                true,
					TTY:                      true,
					TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					Resources: corev1.ResourceRequirements{
						Limits: corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi")},
					},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "cache", MountPath: "/data", SubPath: "worker"},
					},
					SecurityContext: &corev1.SecurityContext{
						RunAsUser: ptr(int64(0)),
						ProcMount: ptr(corev1.UnmaskedProcMount),
					},
				},
			},
		},
	})
}

// oraclePods are the pods whose configs kubelet's own functions made
// (testdata/kubelet): the golden pod and pods for the QoS classes,
// pod-level resources, the host namespaces and the security fields.
func oraclePods() map[string]*corev1.Pod {
	q := resource.MustParse
	return map[string]*corev1.Pod{
		"golden": goldenPod(),
		"besteffort": static(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "plain", UID: "0b6b4c1e-7f7a-4a57-8f1c-4c3d2e1f0a9b"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: "nginx",
			}}},
		}),
		"guaranteed": static(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: "locked", Namespace: "kube-system", UID: "4d2c7b1a-9e8f-4a6b-8c5d-3e2f1a0b9c8d",
				Annotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/c": "localhost/k8s-nginx"},
			},
			Spec: corev1.PodSpec{
				HostIPC:               true,
				ShareProcessNamespace: ptr(true),
				PriorityClassName:     "system-node-critical",
				Overhead:              corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("64Mi")},
				SecurityContext: &corev1.PodSecurityContext{
					SupplementalGroupsPolicy: ptr(corev1.SupplementalGroupsPolicyStrict),
					SELinuxOptions:           &corev1.SELinuxOptions{Level: "s0:c1,c2"},
					AppArmorProfile:          &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault},
				},
				Containers: []corev1.Container{
					{
						Name: "c", Image: "nginx:1.27",
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
							corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("512Mi"), "hugepages-2Mi": q("64Mi"),
						}},
						SecurityContext: &corev1.SecurityContext{Privileged: ptr(true), SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}},
					},
					{
						Name: "d", Image: "nginx:1.27",
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
							corev1.ResourceCPU: q("10m"), corev1.ResourceMemory: q("16Mi"),
						}},
						SecurityContext: &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}},
					},
				},
			},
		}),
		"hostnet": static(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "agent", UID: "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d"},
			Spec: corev1.PodSpec{
				HostNetwork: true,
				HostPID:     true,
				DNSPolicy:   corev1.DNSClusterFirstWithHostNet,
				Containers: []corev1.Container{{
					Name: "a", Image: "agent:v1",
					Ports: []corev1.ContainerPort{
						{Name: "metrics", ContainerPort: 9100},
						{Name: "metrics", ContainerPort: 9101},
						{ContainerPort: 53, Protocol: corev1.ProtocolUDP, HostIP: "::1"},
						{ContainerPort: 53, Protocol: corev1.ProtocolSCTP},
					},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}},
				}},
			},
		}),
		"podlevel": static(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "shared", UID: "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"},
			Spec: corev1.PodSpec{
				Resources: &corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: q("1500m"), corev1.ResourceMemory: q("2Gi")},
					Requests: corev1.ResourceList{corev1.ResourceMemory: q("1Gi")},
				},
				InitContainers: []corev1.Container{{
					Name: "side", Image: "side:1", RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways),
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("512Mi")}},
				}},
				Containers: []corev1.Container{
					{Name: "a", Image: "a:1", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("100Mi"), corev1.ResourceCPU: q("100m")}}},
					{Name: "b", Image: "b:1", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: q("300Mi")}}},
				},
			},
		}),
		"burstable-sidecar": static(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "sc", UID: "7e6d5c4b-3a29-4817-a6f5-e4d3c2b1a098", Annotations: map[string]string{"oracle/image-uid": "1001"}},
			Spec: corev1.PodSpec{
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true)},
				InitContainers: []corev1.Container{{
					Name: "log", Image: "log:1", RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways),
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("4Gi")}},
				}},
				Containers: []corev1.Container{
					{Name: "main", Image: "main:1", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}}},
					{Name: "tiny", Image: "tiny:1", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("10Mi")}, Limits: corev1.ResourceList{corev1.ResourceCPU: q("3")}}},
				},
			},
		}),
		"nonroot-username": static(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "named", UID: "2a3b4c5d-6e7f-4809-9a1b-2c3d4e5f6a7b", Annotations: map[string]string{"oracle/image-user": "nobody"}},
			Spec: corev1.PodSpec{
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true)},
				Containers: []corev1.Container{
					{Name: "n", Image: "n:1"},
					{Name: "u", Image: "u:1", SecurityContext: &corev1.SecurityContext{RunAsUser: ptr(int64(0))}},
					{Name: "ok", Image: "ok:1", SecurityContext: &corev1.SecurityContext{RunAsUser: ptr(int64(7))}},
				},
			},
		}),
		"nonroot-root": static(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "rooted", UID: "3b4c5d6e-7f80-4912-a3b4-c5d6e7f8a9b0"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "r", Image: "r:1", SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr(true)}},
			}},
		}),
	}
}
