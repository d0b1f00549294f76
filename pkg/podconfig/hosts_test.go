package podconfig

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Rows of kubelet's TestManagedHostsFileContent.
func TestHostsFile(t *testing.T) {
	header := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
	for _, tc := range []struct {
		name     string
		ips      []string
		hostname string
		domain   string
		aliases  []corev1.HostAlias
		want     string
	}{
		{"one IP", []string{"123.45.67.89"}, "podFoo", "", nil, header + "123.45.67.89\tpodFoo\n"},
		{"domain", []string{"203.0.113.1"}, "podFoo", "domainFoo", nil, header + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\n"},
		{"aliases", []string{"123.45.67.89"}, "podFoo", "", []corev1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar", "baz"}}},
			header + "123.45.67.89\tpodFoo\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n"},
		{"several aliases", []string{"203.0.113.1"}, "podFoo", "domainFoo", []corev1.HostAlias{
			{IP: "123.45.67.89", Hostnames: []string{"foo", "bar", "baz"}}, {IP: "456.78.90.123", Hostnames: []string{"park", "doo", "boo"}}},
			header + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n456.78.90.123\tpark\tdoo\tboo\n"},
		{"dual stack", []string{"203.0.113.1", "fd00::6"}, "podFoo", "domainFoo", nil,
			header + "203.0.113.1\tpodFoo.domainFoo\tpodFoo\nfd00::6\tpodFoo.domainFoo\tpodFoo\n"},
		{"no IP", nil, "podFoo", "", nil, header},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(HostsFile(tc.ips, tc.hostname, tc.domain, tc.aliases)); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
	got := string(HostNetworkHostsFile([]byte("127.0.0.1 localhost\n"), []corev1.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"a"}}}))
	want := "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n\n# Entries added by HostAliases.\n1.2.3.4\ta\n"
	if got != want {
		t.Errorf("host network:\n%s\nwant:\n%s", got, want)
	}
	if e := HostAliasEntries(nil); e == nil || len(e) != 0 {
		t.Errorf("no aliases: %q", e)
	}
}

func TestShouldMountHostsFile(t *testing.T) {
	pod := &corev1.Pod{}
	hostNet := &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true}}
	if ShouldMountHostsFile(pod, nil) || !ShouldMountHostsFile(pod, []string{"10.0.0.1"}) || !ShouldMountHostsFile(hostNet, nil) {
		t.Error("shouldMountHostsFile rules")
	}
}

// Rows of kubelet's TestGeneratePodHostNameAndDomain and
// TestTruncatePodHostname.
func TestMountsHostsFile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hostNet bool
		podIPs  []string
		mounts  []corev1.VolumeMount
		want    bool
	}{
		{name: "pod network with an IP", podIPs: []string{"10.0.0.1"}, want: true},
		{name: "pod network without an IP"},
		{name: "host network", hostNet: true, want: true},
		{name: "own /etc/hosts", podIPs: []string{"10.0.0.1"}, mounts: []corev1.VolumeMount{{Name: "v", MountPath: "/data"}, {Name: "v", MountPath: "/etc/hosts"}}},
		{name: "another path", podIPs: []string{"10.0.0.1"}, mounts: []corev1.VolumeMount{{Name: "v", MountPath: "/etc/hosts.d"}}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: tc.hostNet}}
			if got := MountsHostsFile(pod, &corev1.Container{VolumeMounts: tc.mounts}, tc.podIPs); got != tc.want {
				t.Errorf("MountsHostsFile = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHostnameAndDomain(t *testing.T) {
	node := Node{ClusterDomain: "cluster.local"}
	pod := func(name, hostname, subdomain string, override *string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: corev1.PodSpec{Hostname: hostname, Subdomain: subdomain, HostnameOverride: override}}
	}
	long := strings.Repeat("a", 62) + "-b"
	for _, tc := range []struct {
		name                 string
		pod                  *corev1.Pod
		wantHost, wantDomain string
		wantErr              string
	}{
		{"pod name", pod("web", "", "", nil), "web", "", ""},
		{"hostname", pod("web", "host", "", nil), "host", "", ""},
		{"subdomain", pod("web", "host", "sub", nil), "host", "sub.ns.svc.cluster.local", ""},
		{"invalid hostname", pod("web", "Host_", "", nil), "", "", `pod Hostname "Host_" is not a valid DNS label: `},
		{"invalid subdomain", pod("web", "", "a.b", nil), "", "", `pod Subdomain "a.b" is not a valid DNS label: `},
		{"long name truncated", pod(strings.Repeat("x", 70), "", "", nil), strings.Repeat("x", 63), "", ""},
		{"truncation drops trailing dash", pod(long+"c", "", "", nil), strings.Repeat("a", 62), "", ""},
		{"override", pod("web", "host", "sub", ptr("my.host.example")), "my.host.example", "", ""},
		{"invalid override", pod("web", "", "", ptr("Bad_Host")), "", "", `pod HostnameOverride "Bad_Host" is not a valid DNS subdomain: `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, d, err := HostnameAndDomain(tc.pod, node)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want %q...", err, tc.wantErr)
				}
				return
			}
			if err != nil || h != tc.wantHost || d != tc.wantDomain {
				t.Errorf("got %q %q %v, want %q %q", h, d, err, tc.wantHost, tc.wantDomain)
			}
		})
	}
}

// Rows of kubelet's TestGetNodenameForKernel.
func TestKernelHostname(t *testing.T) {
	for _, tc := range []struct {
		hostname, domain string
		fqdn             *bool
		want             string
		wantErr          bool
	}{
		{"test.pod.hostname", "", ptr(false), "test.pod.hostname", false},
		{"test.pod.hostname", "", ptr(true), "test.pod.hostname", false},
		{"test.pod.hostname", "test.pod.hostdomain", nil, "test.pod.hostname", false},
		{"test.pod.hostname", "test.pod.hostdomain", ptr(false), "test.pod.hostname", false},
		{"test.pod.hostname", "test.pod.hostdomain", ptr(true), "test.pod.hostname.test.pod.hostdomain", false},
		{"1234567.1234567", "1234567.1234567.1234567.1234567.1234567.1234567.1234567", ptr(true), "", true},
	} {
		got, err := KernelHostname(tc.hostname, tc.domain, tc.fqdn)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("KernelHostname(%q, %q) = %q, %v; want %q", tc.hostname, tc.domain, got, err, tc.want)
		}
	}
}
