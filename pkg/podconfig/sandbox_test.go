package podconfig

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Rows of component-helpers' TestNormalizeName.
func TestNormalizeSysctl(t *testing.T) {
	for in, out := range map[string]string{
		"":                                 "",
		"kernel.shm_rmid_forced":           "kernel.shm_rmid_forced",
		"kernel/shm_rmid_forced":           "kernel.shm_rmid_forced",
		"net.ipv4.conf.eno2/100.rp_filter": "net.ipv4.conf.eno2/100.rp_filter",
		"net/ipv4/conf/eno2.100/rp_filter": "net.ipv4.conf.eno2/100.rp_filter",
		"net/ipv4/ip_local_port_range":     "net.ipv4.ip_local_port_range",
		"kernel/msgmax":                    "kernel.msgmax",
		"kernel/sem":                       "kernel.sem",
		"nosep":                            "nosep",
	} {
		if got := NormalizeSysctl(in); got != out {
			t.Errorf("NormalizeSysctl(%q) = %q, want %q", in, got, out)
		}
	}
}

// Rows of kubelet's TestMakePortMappings.
func TestPortMappings(t *testing.T) {
	port := func(name string, proto corev1.Protocol, container, host int32, ip string) corev1.ContainerPort {
		return corev1.ContainerPort{Name: name, Protocol: proto, ContainerPort: container, HostPort: host, HostIP: ip}
	}
	pm := func(proto runtimeapi.Protocol, container, host int32, ip string) *runtimeapi.PortMapping {
		return &runtimeapi.PortMapping{Protocol: proto, ContainerPort: container, HostPort: host, HostIp: ip}
	}
	for _, tc := range []struct {
		name  string
		ports []corev1.ContainerPort
		want  []*runtimeapi.PortMapping
	}{
		{"named ports, duplicates dropped", []corev1.ContainerPort{
			port("foo", "UDP", 555, 5555, ""), port("foo", "TCP", 80, 8080, "127.0.0.1"), port("", "TCP", 443, 4343, "192.168.0.1"),
			port("", "SCTP", 444, 4444, "::1"), port("", "TCP", 443, 4343, "192.168.0.1")},
			[]*runtimeapi.PortMapping{pm(runtimeapi.Protocol_UDP, 555, 5555, ""), pm(runtimeapi.Protocol_TCP, 443, 4343, "192.168.0.1"), pm(runtimeapi.Protocol_SCTP, 444, 4444, "::1")}},
		{"same port in both families", []corev1.ContainerPort{port("", "TCP", 80, 8080, "0.0.0.0"), port("", "TCP", 80, 8080, "::")},
			[]*runtimeapi.PortMapping{pm(runtimeapi.Protocol_TCP, 80, 8080, "0.0.0.0"), pm(runtimeapi.Protocol_TCP, 80, 8080, "::")}},
		{"unknown protocol is TCP", []corev1.ContainerPort{port("", "BOGUS", 1, 0, "")}, []*runtimeapi.PortMapping{pm(runtimeapi.Protocol_TCP, 1, 0, "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PortMappings(&corev1.Container{Ports: tc.ports})
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if !proto.Equal(got[i], tc.want[i]) {
					t.Errorf("mapping %d: got %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// Rows of kuberuntime's TestGeneratePodSandboxConfig and
// TestGeneratePodSandboxLinuxConfig*.
func TestSandbox(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "new", UID: "12345678", Labels: map[string]string{"l": "v"}},
			Spec: corev1.PodSpec{
				SecurityContext: &corev1.PodSecurityContext{},
				Containers:      []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: "TCP"}}}},
				InitContainers:  []corev1.Container{{Name: "i", Ports: []corev1.ContainerPort{{ContainerPort: 81, HostPort: 8081, Protocol: "TCP"}}}},
			},
		}
	}
	node := Node{ClusterDomain: "cluster.local", ResolvConf: ResolvConf{Nameservers: []string{"10.0.0.2"}}}
	t.Run("basic", func(t *testing.T) {
		got, err := Sandbox(base(), 3, node)
		if err != nil {
			t.Fatal(err)
		}
		if got.Metadata.Attempt != 3 || got.Hostname != "foo" || got.LogDirectory != "/var/log/pods/new_foo_12345678" || got.Annotations != nil {
			t.Errorf("sandbox %v", got)
		}
		// Only regular containers' ports are mapped.
		if len(got.PortMappings) != 1 || got.PortMappings[0].HostPort != 8080 {
			t.Errorf("port mappings %v", got.PortMappings)
		}
		if got.Linux.CgroupParent != "" || got.Linux.SecurityContext.Privileged || got.Linux.SecurityContext.Seccomp.ProfileType != runtimeapi.SecurityProfile_RuntimeDefault {
			t.Errorf("linux %v", got.Linux)
		}
		if !reflect.DeepEqual(got.DnsConfig.Servers, []string{"10.0.0.2"}) {
			t.Errorf("ClusterFirst without cluster DNS falls back to the node's: %v", got.DnsConfig)
		}
	})
	t.Run("kubelet's DNS warnings", func(t *testing.T) {
		_, warnings, err := SandboxWithWarnings(base(), 0, node)
		if err != nil {
			t.Fatal(err)
		}
		want := []Warning{{Reason: "MissingClusterDNS", Message: `pod: "foo_new(12345678)". kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`}}
		if !reflect.DeepEqual(warnings, want) {
			t.Errorf("warnings %+v, want %+v", warnings, want)
		}
		withDNS := node
		withDNS.ClusterDNS = []string{"10.96.0.10"}
		pod := base()
		pod.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "1.0.0.1", "8.8.8.8"}}
		_, warnings, _ = SandboxWithWarnings(pod, 0, withDNS)
		want = []Warning{{Reason: "DNSConfigForming", Message: "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 10.96.0.10 1.1.1.1 1.0.0.1"}}
		if !reflect.DeepEqual(warnings, want) {
			t.Errorf("warnings %+v, want %+v", warnings, want)
		}
	})
	t.Run("FQDN hostname", func(t *testing.T) {
		pod := base()
		pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.SetHostnameAsFQDN = "h", "s", ptr(true)
		got, err := Sandbox(pod, 0, node)
		if err != nil || got.Hostname != "h.s.new.svc.cluster.local" {
			t.Errorf("hostname %q %v", got.GetHostname(), err)
		}
		pod.Spec.Hostname = strings.Repeat("h", 41)
		if _, err := Sandbox(pod, 0, node); err == nil || !strings.Contains(err.Error(), "FQDN") {
			t.Errorf("FQDN too long: %v", err)
		}
	})
	t.Run("host network has no hostname", func(t *testing.T) {
		pod := base()
		pod.Spec.HostNetwork, pod.Spec.HostPID = true, true
		got, err := Sandbox(pod, 0, node)
		if err != nil || got.Hostname != "" {
			t.Errorf("hostname %q %v", got.GetHostname(), err)
		}
		ns := got.Linux.SecurityContext.NamespaceOptions
		if ns.Network != runtimeapi.NamespaceMode_NODE || ns.Pid != runtimeapi.NamespaceMode_NODE || ns.Ipc != runtimeapi.NamespaceMode_POD {
			t.Errorf("namespaces %v", ns)
		}
	})
	t.Run("security context", func(t *testing.T) {
		pod := base()
		pod.Spec.InitContainers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true)}
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{
			RunAsUser: ptr(int64(1)), RunAsGroup: ptr(int64(2)), FSGroup: ptr(int64(3)), SupplementalGroups: []int64{4, 5},
			SupplementalGroupsPolicy: ptr(corev1.SupplementalGroupsPolicyStrict),
			SELinuxOptions:           &corev1.SELinuxOptions{Level: "s0"},
			Sysctls:                  []corev1.Sysctl{{Name: "kernel/shm_rmid_forced", Value: "1"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined},
		}
		got, err := Sandbox(pod, 0, node)
		if err != nil {
			t.Fatal(err)
		}
		want := &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Ipc: runtimeapi.NamespaceMode_POD, Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER,
				UsernsOptions: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}},
			SelinuxOptions:           &runtimeapi.SELinuxOption{Level: "s0"},
			RunAsUser:                &runtimeapi.Int64Value{Value: 1},
			RunAsGroup:               &runtimeapi.Int64Value{Value: 2},
			SupplementalGroups:       []int64{3, 4, 5},
			SupplementalGroupsPolicy: runtimeapi.SupplementalGroupsPolicy_Strict,
			Privileged:               true,
			// The pod's profile is for its containers: the sandbox runs under RuntimeDefault.
			Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
		}
		if !proto.Equal(got.Linux.SecurityContext, want) {
			t.Errorf("got  %v\nwant %v", got.Linux.SecurityContext, want)
		}
		if !reflect.DeepEqual(got.Linux.Sysctls, map[string]string{"kernel.shm_rmid_forced": "1"}) {
			t.Errorf("sysctls %v", got.Linux.Sysctls)
		}
		pod.Spec.SecurityContext.SupplementalGroupsPolicy = ptr(corev1.SupplementalGroupsPolicy("Bogus"))
		if _, err := Sandbox(pod, 0, node); err == nil || !strings.Contains(err.Error(), "unsupported supplementalGroupsPolicy: Bogus") {
			t.Errorf("bad policy: %v", err)
		}
	})
	t.Run("no pod security context", func(t *testing.T) {
		pod := base()
		pod.Spec.SecurityContext = nil
		got, err := Sandbox(pod, 0, node)
		if err != nil || got.Linux.SecurityContext.NamespaceOptions != nil || len(got.Linux.Sysctls) != 0 {
			t.Errorf("got %v %v", got.GetLinux(), err)
		}
	})
	t.Run("errors", func(t *testing.T) {
		pod := base()
		pod.Spec.Hostname = "Bad_Name"
		if _, err := Sandbox(pod, 0, node); err == nil || !strings.Contains(err.Error(), `pod Hostname "Bad_Name" is not a valid DNS label`) {
			t.Errorf("bad hostname: %v", err)
		}
		if _, err := Sandbox(nil, 0, node); err == nil {
			t.Error("nil pod")
		}
		pod = base()
		pod.Spec.HostUsers = ptr(false)
		if _, err := Sandbox(pod, 0, node); err == nil {
			t.Error("hostUsers: false")
		}
	})
}

func TestContainerErrors(t *testing.T) {
	pod := static(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}})
	c := &pod.Spec.Containers[0]
	node := Node{MemoryCapacity: 1 << 30}
	if _, err := Container(ContainerInput{Pod: pod}, node); err == nil {
		t.Error("no container")
	}
	var ce *ConfigError
	bad := pod.DeepCopy()
	bad.Spec.Hostname = "Bad_Name"
	if _, err := Container(ContainerInput{Pod: bad, Container: &bad.Spec.Containers[0]}, node); !errors.As(err, &ce) || !strings.HasPrefix(ce.Message, `pod Hostname "Bad_Name"`) {
		t.Errorf("every failure is a ConfigError with kubelet's text: %v", err)
	}
	sc := pod.DeepCopy()
	sc.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}}
	if _, err := Container(ContainerInput{Pod: sc, Container: &sc.Spec.Containers[0]}, node); !errors.As(err, &ce) || ce.Message != "localhostProfile must be set if seccompProfile type is Localhost." {
		t.Errorf("seccomp: %v", err)
	}
	cfg, err := Container(ContainerInput{Pod: pod, Container: c, Image: ImageInfo{Ref: "sha256:1"}}, node)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Devices == nil || cfg.CDIDevices == nil || cfg.StopSignal != 0 || cfg.Image.Image != "sha256:1" || cfg.Image.UserSpecifiedImage != "i" {
		t.Errorf("config %v", cfg)
	}
	// No pod IP yet and no termination file: no mounts at all.
	if len(cfg.Mounts) != 0 {
		t.Errorf("mounts %v", cfg.Mounts)
	}
	// The stop signal stays unset (gate ContainerStopSignals off in 1.36).
	sig := pod.DeepCopy()
	sig.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{StopSignal: ptr(corev1.SIGUSR1)}
	if cfg, _ := Container(ContainerInput{Pod: sig, Container: &sig.Spec.Containers[0]}, node); cfg.StopSignal != runtimeapi.Signal_RUNTIME_DEFAULT {
		t.Errorf("stop signal %v", cfg.StopSignal)
	}
}
