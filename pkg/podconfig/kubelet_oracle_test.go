package podconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet-level half of the oracle (testdata/kubelet/kl-*.json,
// dns.json): what pkg/kubelet's makeEnvironmentVariables, makeMounts (with
// the fake subpather, which mounts <volume>/<subPath>), the managed hosts
// file, GeneratePodHostNameAndDomain and network/dns's GetPodDNS returned,
// made by testdata/kubelet/kubelet_oracle_test.go.txt run as
// pkg/kubelet/zz_podconfig_oracle_test.go with ORACLE_KL_IN and ORACLE_OUT.

// klNode is the node of the kubelet-level oracle: kubelet without an API
// server takes its own node object (initialNode: address 127.0.0.1, the
// test kubelet's hostname), cluster domain cluster.local, no cluster DNS.
func klNode() Node {
	return Node{
		Name:          "127.0.0.1",
		IPs:           []string{"127.0.0.1"},
		ClusterDomain: "cluster.local",
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("4"),
			corev1.ResourceMemory:           resource.MustParse("8Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		},
		MemoryCapacity: 8 << 30,
	}
}

var klPodIPs = []string{"fd00::7", "10.88.0.7"}

type klCase struct {
	Pod           *corev1.Pod         `json:"pod"`
	PodIPs        []string            `json:"podIPs"`
	Volumes       map[string]klVolume `json:"volumes"`
	Node          *corev1.Node        `json:"node"`
	ClusterDomain string              `json:"clusterDomain"`
}

type klVolume struct {
	Path           string `json:"path"`
	ReadOnly       bool   `json:"readOnly"`
	SELinuxRelabel bool   `json:"selinuxRelabel"`
}

func klVolumes(pod *corev1.Pod, node Node) map[string]Volume {
	vols := map[string]Volume{}
	for i := range pod.Spec.Volumes {
		if v, ok := VolumeFor(pod, &pod.Spec.Volumes[i], node); ok {
			vols[pod.Spec.Volumes[i].Name] = v
		}
	}
	return vols
}

func writeKubeletOracleInputs(t *testing.T, dir string) {
	node := klNode()
	var addrs []corev1.NodeAddress
	for _, ip := range node.IPs {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	apiNode := &corev1.Node{Status: corev1.NodeStatus{Addresses: addrs, Allocatable: node.Allocatable}}
	for name, pod := range oraclePods() {
		c := klCase{Pod: pod, PodIPs: klPodIPs, Node: apiNode, ClusterDomain: node.ClusterDomain, Volumes: map[string]klVolume{}}
		for n, v := range klVolumes(pod, node) {
			c.Volumes[n] = klVolume{Path: v.HostPath, ReadOnly: v.ReadOnly, SELinuxRelabel: v.SELinuxRelabel}
		}
		writeJSON(t, filepath.Join(dir, "kl-"+name+".json"), c)
	}
	writeJSON(t, filepath.Join(dir, "dns-cases.json"), dnsCases())
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestKubeletLevelOracle compares environment, command and args, mounts,
// the hosts file and hostname with kubelet's for the oracle pods.
func TestKubeletLevelOracle(t *testing.T) {
	node := klNode()
	for name, pod := range oraclePods() {
		t.Run(name, func(t *testing.T) {
			var want map[string]json.RawMessage
			data, err := os.ReadFile(filepath.Join(oracleDir, "kl-"+name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			var wantHost struct{ Hostname, Domain, Error string }
			_ = json.Unmarshal(want["hostname"], &wantHost)
			hostname, domain, err := HostnameAndDomain(pod, node)
			if err != nil || hostname != wantHost.Hostname || domain != wantHost.Domain {
				t.Errorf("HostnameAndDomain = %q, %q, %v; kubelet: %+v", hostname, domain, err, wantHost)
			}
			var wantHosts string
			_ = json.Unmarshal(want["etc-hosts"], &wantHosts)
			if got := string(HostsFile(klPodIPs, hostname, domain, pod.Spec.HostAliases)); !pod.Spec.HostNetwork && got != wantHosts {
				t.Errorf("hosts file:\n%s\nkubelet's:\n%s", got, wantHosts)
			}
			for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
				for i := range list {
					c := &list[i]
					key := "container/" + c.Name
					var w struct {
						Error         string
						Env           [][2]string
						Command, Args []string
						Mounts        []map[string]any
					}
					if err := json.Unmarshal(want[key], &w); err != nil {
						t.Fatalf("%s: %v", key, err)
					}
					in := oracleInput(pod, c)
					in.PodIPs, in.PodIP, in.Volumes, in.RestartCount = klPodIPs, klPodIPs[0], klVolumes(pod, node), 0
					cfg, err := Container(in, node)
					if w.Error != "" {
						if err == nil || err.Error() != w.Error {
							t.Errorf("%s: error %v, kubelet's %q", key, err, w.Error)
						}
						continue
					}
					if err != nil {
						// verifyRunAsNonRoot is later than what this oracle covers.
						if !strings.Contains(err.Error(), "runAsNonRoot") && !strings.Contains(err.Error(), "non-root") {
							t.Errorf("%s: %v", key, err)
						}
						continue
					}
					var env [][2]string
					for _, e := range cfg.Envs {
						env = append(env, [2]string{e.Key, string(e.Value)})
					}
					sort.Slice(env, func(i, j int) bool { return env[i][0] < env[j][0] })
					if !reflect.DeepEqual(env, w.Env) {
						t.Errorf("%s env:\n%v\nkubelet's:\n%v", key, env, w.Env)
					}
					if !reflect.DeepEqual(cfg.Command, w.Command) || !reflect.DeepEqual(cfg.Args, w.Args) {
						t.Errorf("%s command %q args %q, kubelet's %q %q", key, cfg.Command, cfg.Args, w.Command, w.Args)
					}
					// kubelet's mounts say whether to relabel; kuberuntime then
					// relabels only on a node with SELinux enabled.
					selinuxNode := node
					selinuxNode.SELinuxEnabled = true
					relabelled, err := Container(in, selinuxNode)
					if err != nil {
						t.Fatal(err)
					}
					var mounts []map[string]any
					for i, m := range cfg.Mounts {
						if m.SelinuxRelabel {
							t.Errorf("%s: mount %d relabelled without SELinux", key, i)
						}
						mounts = append(mounts, map[string]any{
							"hostPath": m.HostPath, "containerPath": m.ContainerPath, "readOnly": m.Readonly,
							"propagation": m.Propagation.String(), "recursiveReadOnly": m.RecursiveReadOnly,
							"selinuxRelabel": relabelled.Mounts[i].SelinuxRelabel,
						})
					}
					for _, m := range w.Mounts {
						delete(m, "name")
					}
					if len(mounts) != len(w.Mounts) {
						t.Errorf("%s mounts:\n%v\nkubelet's:\n%v", key, mounts, w.Mounts)
						continue
					}
					for i := range mounts {
						if !reflect.DeepEqual(mounts[i], w.Mounts[i]) {
							t.Errorf("%s mount %d: %v, kubelet's %v", key, i, mounts[i], w.Mounts[i])
						}
					}
				}
			}
		})
	}
}

type dnsCase struct {
	Pod           *corev1.Pod `json:"pod"`
	NodeIPs       []string    `json:"nodeIPs"`
	ClusterDNS    []string    `json:"clusterDNS"`
	ClusterDomain string      `json:"clusterDomain"`
	ResolvConf    *string     `json:"resolvConf"`
}

func dnsPod(policy corev1.DNSPolicy, hostNetwork bool, dc *corev1.PodDNSConfig) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns1"},
		Spec:       corev1.PodSpec{DNSPolicy: policy, HostNetwork: hostNetwork, DNSConfig: dc},
	}
}

// dnsCases are the rows of kubelet's dns_test.go (TestGetPodDNS,
// TestGetPodDNSType, TestGetPodDNSCustom, TestDNSConfigurationParams,
// TestFormDNSSearchFitsLimits, TestFormDNSNameserversFitsLimits) as
// whole pods.
func dnsCases() map[string]dnsCase {
	resolv := "nameserver 10.0.0.2\nnameserver 10.0.0.3\n# comment\nsearch corp.example. lab.example .\noptions ndots:2 attempts:3\noptions timeout:1 ndots:1\n"
	many := "nameserver 1.1.1.1\nnameserver 1.1.1.2\nnameserver 1.1.1.3\nnameserver 1.1.1.4\n"
	var long []string
	for i := 0; i < 40; i++ {
		long = append(long, strings.Repeat("x", 60)+".example")
	}
	longSearch := "search " + strings.Join(long, " ") + "\n"
	tooLong := "search " + strings.Repeat("y", 254) + " ok.example\n"
	broken := "nameserver\n"
	custom := &corev1.PodDNSConfig{
		Nameservers: []string{"203.0.113.1", "10.0.0.2"},
		Searches:    []string{"extra.example", "ns1.svc.cluster.local"},
		Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("3")}, {Name: "edns0"}, {Name: "use-vc", Value: ptr("")}},
	}
	return map[string]dnsCase{
		"cluster first":                    {Pod: dnsPod(corev1.DNSClusterFirst, false, nil), ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: &resolv},
		"cluster first, two cluster DNS":   {Pod: dnsPod(corev1.DNSClusterFirst, false, nil), ClusterDNS: []string{"10.96.0.10", "fd00::a"}, ClusterDomain: "cluster.local", ResolvConf: &resolv},
		"cluster first, no domain":         {Pod: dnsPod(corev1.DNSClusterFirst, false, nil), ClusterDNS: []string{"10.96.0.10"}, ResolvConf: &resolv},
		"cluster first without clusterDNS": {Pod: dnsPod(corev1.DNSClusterFirst, false, nil), ClusterDomain: "cluster.local", ResolvConf: &resolv},
		"cluster first on host network":    {Pod: dnsPod(corev1.DNSClusterFirst, true, nil), ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: &resolv},
		"cluster first with host net":      {Pod: dnsPod(corev1.DNSClusterFirstWithHostNet, true, nil), ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: &resolv},
		"default":                          {Pod: dnsPod(corev1.DNSDefault, false, nil), ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: &resolv},
		"default without resolv.conf":      {Pod: dnsPod(corev1.DNSDefault, false, nil), NodeIPs: []string{"192.0.2.1", "2001:db8::1"}},
		"default without resolv.conf, v6":  {Pod: dnsPod(corev1.DNSDefault, false, nil), NodeIPs: []string{"2001:db8::1"}},
		"default without anything":         {Pod: dnsPod(corev1.DNSDefault, false, nil)},
		"none":                             {Pod: dnsPod(corev1.DNSNone, false, custom), ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: &resolv},
		"cluster first with dnsConfig":     {Pod: dnsPod(corev1.DNSClusterFirst, false, custom), ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: &resolv},
		"default with dnsConfig":           {Pod: dnsPod(corev1.DNSDefault, false, custom), ResolvConf: &resolv},
		"unknown policy":                   {Pod: dnsPod("Bogus", false, nil), ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: &resolv},
		"too many nameservers":             {Pod: dnsPod(corev1.DNSDefault, false, nil), ResolvConf: &many},
		"too many searches":                {Pod: dnsPod(corev1.DNSClusterFirst, false, nil), ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: &longSearch},
		"search path too long":             {Pod: dnsPod(corev1.DNSDefault, false, nil), ResolvConf: &tooLong},
		"broken resolv.conf":               {Pod: dnsPod(corev1.DNSDefault, false, nil), ResolvConf: &broken},
	}
}

// TestDNSOracle compares DNS with kubelet's GetPodDNS; options compare as
// sets, kubelet's order being a map's.
func TestDNSOracle(t *testing.T) {
	var want map[string]json.RawMessage
	data, err := os.ReadFile(filepath.Join(oracleDir, "dns.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	for name, tc := range dnsCases() {
		t.Run(name, func(t *testing.T) {
			node := Node{IPs: tc.NodeIPs, ClusterDNS: tc.ClusterDNS, ClusterDomain: tc.ClusterDomain, NoResolvConf: tc.ResolvConf == nil}
			var e struct{ Error string }
			_ = json.Unmarshal(want[name], &e)
			if tc.ResolvConf != nil {
				rc, err := ParseResolvConf([]byte(*tc.ResolvConf))
				if e.Error != "" {
					if err == nil || !strings.HasSuffix(e.Error, "Error: "+err.Error()) {
						t.Errorf("ParseResolvConf error %v, kubelet's %q", err, e.Error)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				node.ResolvConf = rc
			}
			w := &runtimeapi.DNSConfig{}
			if err := protojson.Unmarshal(want[name], w); err != nil {
				t.Fatal(err)
			}
			got, _ := DNS(tc.Pod, node)
			sort.Strings(got.Options)
			sort.Strings(w.Options)
			if !reflect.DeepEqual(nonNil(got.Servers), nonNil(w.Servers)) || !reflect.DeepEqual(nonNil(got.Searches), nonNil(w.Searches)) ||
				!reflect.DeepEqual(nonNil(got.Options), nonNil(w.Options)) {
				t.Errorf("DNS = %v\nkubelet's %v", got, w)
			}
		})
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
