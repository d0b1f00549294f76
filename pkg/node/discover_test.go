package node

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

// A host's /proc/net/route and ipv6_route with default routes through eth0.
const (
	routeV4 = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
		"eth0\t0001A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
	routeV6 = "20010db8000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n" +
		"00000000000000000000000000000000 00 00000000000000000000000000000000 00 20010db8000000000000000000000001 00000400 00000002 00000000 00000003     eth0\n"
)

// fakeNet is a host's interfaces: lo, eth0 with an IPv4, a link-local and
// a global IPv6 address, and eth1 up without addresses.
func fakeNet() map[string]ifaceAddrs {
	return map[string]ifaceAddrs{
		"lo":   {flags: net.FlagUp | net.FlagLoopback, addrs: []string{"127.0.0.1/8", "::1/128"}},
		"eth0": {flags: net.FlagUp, addrs: []string{"192.168.1.5/24", "fe80::1/64", "2001:db8::5/64"}},
		"eth1": {flags: net.FlagUp},
	}
}

type ifaceAddrs struct {
	flags net.Flags
	addrs []string
}

// fakeHost is a node on temporary /proc, /sys and /etc trees: 4 CPUs
// online of 4 possible, 2000 MiB of memory, ten 2 MiB huge pages, a root
// file system of 4 GiB, cgroup v1 with swap accounting, no SELinux.
type fakeHost struct {
	files    map[string]string // under the fake root: "proc/meminfo"
	hostname string
	lookup   map[string][]string
	ifaces   map[string]ifaceAddrs
	statfs   map[string]unix.Statfs_t // by path relative to the fake root, or absolute
}

func newFakeHost() *fakeHost {
	return &fakeHost{
		files: map[string]string{
			"proc/meminfo":                    "MemTotal:        2048000 kB\nMemFree:          100000 kB\n",
			"proc/net/route":                  routeV4,
			"proc/net/ipv6_route":             routeV6,
			"proc/self/cgroup":                "12:memory:/user.slice\n0::/user.slice\n",
			"proc/filesystems":                "nodev\tsysfs\nnodev\ttmpfs\n",
			"etc/resolv.conf":                 "nameserver 192.168.1.1\nsearch example.com\noptions ndots:2\n",
			"sys/devices/system/cpu/online":   "0-3\n",
			"sys/devices/system/cpu/possible": "0-3\n",
			"sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count": "0\n",
			"sys/devices/system/cpu/cpu2/thermal_throttle/core_throttle_count": "0\n",
			"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":            "10\n",
			"sys/fs/cgroup/memory/memory.memsw.limit_in_bytes":                 "9223372036854771712\n",
		},
		hostname: "Node-A\n",
		lookup:   map[string][]string{},
		ifaces:   fakeNet(),
		statfs: map[string]unix.Statfs_t{
			"/var/lib/kubelet": {Frsize: 4096, Blocks: 1 << 20},
			"sys/fs/cgroup":    {Type: unix.TMPFS_MAGIC},
		},
	}
}

// options writes the trees and returns options reading them.
func (h *fakeHost) options(t *testing.T) Options {
	t.Helper()
	root := t.TempDir()
	for p, content := range h.files {
		writeFile(t, filepath.Join(root, p), content)
	}
	var ifaces []net.Interface
	for i, name := range []string{"lo", "eth0", "eth1", "eth2"} {
		if ia, ok := h.ifaces[name]; ok {
			ifaces = append(ifaces, net.Interface{Index: i + 1, Name: name, Flags: ia.flags})
		}
	}
	return Options{
		ProcRoot: filepath.Join(root, "proc"),
		SysRoot:  filepath.Join(root, "sys"),
		EtcRoot:  filepath.Join(root, "etc"),
		host: nodeHost{
			hostname: func() (string, error) {
				if h.hostname == "" {
					return "", errors.New("uname failed")
				}
				return h.hostname, nil
			},
			lookupIP: func(host string) ([]net.IP, error) {
				var out []net.IP
				for _, s := range h.lookup[host] {
					out = append(out, net.ParseIP(s))
				}
				if out == nil {
					return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
				}
				return out, nil
			},
			interfaces: func() ([]net.Interface, error) { return ifaces, nil },
			addrs: func(i net.Interface) ([]net.Addr, error) {
				var out []net.Addr
				for _, s := range h.ifaces[i.Name].addrs {
					ip, n, err := net.ParseCIDR(s)
					if err != nil {
						return nil, err
					}
					n.IP = ip
					out = append(out, n)
				}
				return out, nil
			},
			statfs: func(path string, st *unix.Statfs_t) error {
				for p, v := range h.statfs {
					if !filepath.IsAbs(p) {
						p = filepath.Join(root, p)
					}
					if p == path {
						*st = v
						return nil
					}
				}
				return unix.ENOENT
			},
		},
	}
}

func TestDiscover(t *testing.T) {
	mi := func(s string) resource.Quantity { return resource.MustParse(s) }
	// The fake host's node with kubelet's defaults.
	base := func() podconfig.Node {
		return podconfig.Node{
			Name:       "node-a",
			IPs:        []string{"192.168.1.5"},
			RootDir:    "/var/lib/kubelet",
			ResolvConf: podconfig.ResolvConf{Nameservers: []string{"192.168.1.1"}, Searches: []string{"example.com"}, Options: []string{"ndots:2"}},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:              mi("4"),
				corev1.ResourceMemory:           *resource.NewQuantity(2048000*1024-20<<20, resource.BinarySI),
				corev1.ResourceEphemeralStorage: mi("4Gi"),
				corev1.ResourcePods:             mi("110"),
				"hugepages-2Mi":                 mi("20Mi"),
			},
			MemoryCapacity:          2048000 * 1024,
			CgroupRoot:              "/kubepods",
			CgroupDriver:            "cgroupfs",
			SingleProcessOOMKill:    true,
			SwapControllerAvailable: true,
			HugePageSizes:           []string{"2MB"},
			ThermalThrottlePaths: []string{
				"/sys/devices/system/cpu/cpu0/thermal_throttle",
				"/sys/devices/system/cpu/cpu2/thermal_throttle",
			},
		}
	}
	for _, tc := range []struct {
		name    string
		host    func(h *fakeHost)
		opts    func(o *Options)
		want    func(n *podconfig.Node)
		wantErr string
	}{
		{name: "kubelet's defaults"},

		// The name: nodeutil.GetHostname.
		{name: "hostname override", opts: func(o *Options) { o.HostnameOverride = " Worker-7.Example " },
			want: func(n *podconfig.Node) { n.Name = "worker-7.example" }},
		{name: "no hostname", host: func(h *fakeHost) { h.hostname = "" }, wantErr: "couldn't determine hostname: uname failed"},
		{name: "blank hostname", host: func(h *fakeHost) { h.hostname = " \n" }, wantErr: "empty hostname is invalid"},

		// The addresses: nodestatus.NodeAddress.
		{name: "hostname is an address", opts: func(o *Options) { o.HostnameOverride = "10.0.0.9" },
			want: func(n *podconfig.Node) { n.Name = "10.0.0.9"; n.IPs = []string{"10.0.0.9"} }},
		{name: "name resolves: an address on the host, IPv4 first",
			host: func(h *fakeHost) { h.lookup["node-a"] = []string{"127.0.1.1", "2001:db8::5", "192.168.1.5"} }},
		{name: "name resolves to IPv6 only", host: func(h *fakeHost) { h.lookup["node-a"] = []string{"2001:db8::5"} },
			want: func(n *podconfig.Node) { n.IPs = []string{"2001:db8::5"} }},
		{name: "name resolves off the host: the default route's",
			host: func(h *fakeHost) { h.lookup["node-a"] = []string{"10.9.9.9", "127.0.1.1"} }},
		{name: "node-ip", opts: func(o *Options) { o.NodeIP = "192.168.1.5" }},
		{name: "node-ip IPv6", opts: func(o *Options) { o.NodeIP = "2001:db8::5" },
			want: func(n *podconfig.Node) { n.IPs = []string{"2001:db8::5"} }},
		{name: "node-ip dual stack", opts: func(o *Options) { o.NodeIP = "2001:db8::5, 192.168.1.5" },
			want: func(n *podconfig.Node) { n.IPs = []string{"2001:db8::5", "192.168.1.5"} }},
		{name: "node-ip with an invalid address ignored", opts: func(o *Options) { o.NodeIP = "junk,192.168.1.5" }},
		{name: "node-ip ::: IPv6 first", opts: func(o *Options) { o.NodeIP = "::" },
			want: func(n *podconfig.Node) { n.IPs = []string{"2001:db8::5"} }},
		{name: "node-ip 0.0.0.0", opts: func(o *Options) { o.NodeIP = "0.0.0.0" }},
		{name: "node-ip not on the host", opts: func(o *Options) { o.NodeIP = "10.1.1.1" },
			wantErr: `failed to validate nodeIP: node IP: "10.1.1.1" not found in the host's network interfaces`},
		{name: "node-ip loopback", opts: func(o *Options) { o.NodeIP = "127.0.0.1" },
			wantErr: "failed to validate nodeIP: nodeIP can't be loopback address"},
		{name: "node-ip pair of one family", opts: func(o *Options) { o.NodeIP = "192.168.1.5,10.0.0.1" },
			wantErr: "must contain either a single IP or a dual-stack pair of IPs"},
		{name: "node-ip pair with ::", opts: func(o *Options) { o.NodeIP = "192.168.1.5,::" },
			wantErr: "dual-stack node IP cannot include '0.0.0.0' or '::'"},
		{name: "no route table: any interface's", host: func(h *fakeHost) { delete(h.files, "proc/net/route") }},
		{name: "no default route", host: func(h *fakeHost) {
			h.files["proc/net/route"] = "Iface\tDestination\tGateway\n"
			h.files["proc/net/ipv6_route"] = ""
		}, wantErr: "can't get ip address of node node-a"},
		{name: "default route's interface without an address: the loopback's global one", host: func(h *fakeHost) {
			h.files["proc/net/route"] = strings.ReplaceAll(routeV4, "eth0", "eth1")
			h.ifaces["lo"] = ifaceAddrs{flags: net.FlagUp | net.FlagLoopback, addrs: []string{"127.0.0.1/8", "10.255.0.1/32"}}
		}, want: func(n *podconfig.Node) { n.IPs = []string{"10.255.0.1"} }},
		{name: "default route's interface down", host: func(h *fakeHost) {
			h.files["proc/net/route"] = strings.ReplaceAll(routeV4, "eth0", "eth1")
			h.ifaces["eth1"] = ifaceAddrs{addrs: []string{"10.7.7.7/24"}}
			h.files["proc/net/ipv6_route"] = ""
		}, wantErr: "unable to select an IP from default routes."},

		// resolv.conf: kubelet's --resolv-conf.
		{name: "no resolv.conf", opts: func(o *Options) { o.ResolvConf = ptr.To("") },
			host: func(h *fakeHost) { delete(h.files, "etc/resolv.conf") },
			want: func(n *podconfig.Node) { n.NoResolvConf = true; n.ResolvConf = podconfig.ResolvConf{} }},
		{name: "resolv.conf elsewhere", host: func(h *fakeHost) { h.files["etc/alt/resolv.conf"] = "nameserver 10.0.0.53\n" },
			opts: func(o *Options) { o.ResolvConf = ptr.To(filepath.Join(o.EtcRoot, "alt/resolv.conf")) },
			want: func(n *podconfig.Node) {
				n.ResolvConf = podconfig.ResolvConf{Nameservers: []string{"10.0.0.53"}, Searches: []string{}, Options: []string{}}
			}},
		{name: "resolv.conf missing", host: func(h *fakeHost) { delete(h.files, "etc/resolv.conf") }, wantErr: "resolv.conf: open"},
		{name: "resolv.conf bad", host: func(h *fakeHost) { h.files["etc/resolv.conf"] = "nameserver\n" }, wantErr: "nameserver list is empty"},

		// Capacity and allocatable: CapacityFromMachineInfo, MachineInfo.
		{name: "reserved", opts: func(o *Options) {
			o.Reserved = corev1.ResourceList{corev1.ResourceMemory: mi("100Mi"), corev1.ResourceEphemeralStorage: mi("1Gi"), corev1.ResourceCPU: mi("8")}
		}, want: func(n *podconfig.Node) {
			n.Allocatable[corev1.ResourceMemory] = *resource.NewQuantity(2048000*1024-120<<20, resource.BinarySI)
			n.Allocatable[corev1.ResourceEphemeralStorage] = mi("3Gi")
			n.Allocatable[corev1.ResourceCPU] = mi("0")
		}},
		{name: "max pods", opts: func(o *Options) { o.MaxPods = 32 }, want: func(n *podconfig.Node) { n.Allocatable[corev1.ResourcePods] = mi("32") }},
		{name: "online CPUs, not possible ones", host: func(h *fakeHost) { h.files["sys/devices/system/cpu/online"] = "0,2-3\n" },
			want: func(n *podconfig.Node) { n.Allocatable[corev1.ResourceCPU] = mi("3") }},
		{name: "root dir not made yet: its parent's file system", opts: func(o *Options) { o.RootDir = "/var/lib/kubelet/new/" },
			want: func(n *podconfig.Node) { n.RootDir = "/var/lib/kubelet/new" }},
		{name: "no root file system", opts: func(o *Options) { o.RootDir = "/srv/kubelet" }, wantErr: "the file system of /srv/kubelet"},
		{name: "no meminfo", host: func(h *fakeHost) { delete(h.files, "proc/meminfo") }, wantErr: "reading the node's memory"},
		{name: "no MemTotal", host: func(h *fakeHost) { h.files["proc/meminfo"] = "MemFree: 1 kB\n" }, wantErr: "no MemTotal"},
		{name: "two huge page sizes", host: func(h *fakeHost) {
			h.files["sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"] = "1\n"
		}, want: func(n *podconfig.Node) {
			n.Allocatable["hugepages-1Gi"] = mi("1Gi")
			n.Allocatable[corev1.ResourceMemory] = *resource.NewQuantity(2048000*1024-20<<20-1<<30, resource.BinarySI)
			n.HugePageSizes = []string{"1GB", "2MB"}
		}},
		{name: "no huge pages", host: func(h *fakeHost) { delete(h.files, "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages") },
			want: func(n *podconfig.Node) {
				delete(n.Allocatable, "hugepages-2Mi")
				n.Allocatable[corev1.ResourceMemory] = *resource.NewQuantity(2048000*1024, resource.BinarySI)
				n.HugePageSizes = nil
			}},

		// cgroups: IsCgroup2UnifiedMode, checkSwapControllerAvailability.
		{name: "cgroup v2 with swap", host: func(h *fakeHost) {
			h.statfs["sys/fs/cgroup"] = unix.Statfs_t{Type: unix.CGROUP2_SUPER_MAGIC}
			delete(h.files, "sys/fs/cgroup/memory/memory.memsw.limit_in_bytes")
			h.files["sys/fs/cgroup/user.slice/memory.swap.max"] = "max\n"
		}, want: func(n *podconfig.Node) { n.CgroupV2 = true; n.SingleProcessOOMKill = false }},
		{name: "cgroup v2 without swap", host: func(h *fakeHost) {
			h.statfs["sys/fs/cgroup"] = unix.Statfs_t{Type: unix.CGROUP2_SUPER_MAGIC}
		}, want: func(n *podconfig.Node) {
			n.CgroupV2 = true
			n.SingleProcessOOMKill = false
			n.SwapControllerAvailable = false
		}},
		{name: "cgroup v2, singleProcessOOMKill", host: func(h *fakeHost) {
			h.statfs["sys/fs/cgroup"] = unix.Statfs_t{Type: unix.CGROUP2_SUPER_MAGIC}
		}, opts: func(o *Options) { o.SingleProcessOOMKill = ptr.To(true) },
			want: func(n *podconfig.Node) { n.CgroupV2 = true; n.SwapControllerAvailable = false }},
		{name: "cgroup v1 without swap accounting", host: func(h *fakeHost) {
			delete(h.files, "sys/fs/cgroup/memory/memory.memsw.limit_in_bytes")
		}, want: func(n *podconfig.Node) { n.SwapControllerAvailable = false }},
		{name: "cgroup root and driver", opts: func(o *Options) { o.CgroupRoot = "/agent"; o.CgroupDriver = "systemd" },
			want: func(n *podconfig.Node) { n.CgroupRoot = "/agent"; n.CgroupDriver = "systemd" }},

		// SELinux: go-selinux's GetEnabled.
		{name: "SELinux", host: func(h *fakeHost) {
			h.statfs["sys/fs/selinux"] = unix.Statfs_t{Type: unix.SELINUX_MAGIC}
			h.files["proc/thread-self/attr/current"] = "system_u:system_r:unconfined_t:s0\x00"
		}, want: func(n *podconfig.Node) { n.SELinuxEnabled = true }},
		{name: "SELinux, the agent's label kernel", host: func(h *fakeHost) {
			h.statfs["sys/fs/selinux"] = unix.Statfs_t{Type: unix.SELINUX_MAGIC}
			h.files["proc/self/attr/current"] = "kernel\n"
		}},
		{name: "selinuxfs read-only", host: func(h *fakeHost) {
			h.statfs["sys/fs/selinux"] = unix.Statfs_t{Type: unix.SELINUX_MAGIC, Flags: unix.ST_RDONLY}
		}},
		{name: "selinuxfs elsewhere", host: func(h *fakeHost) {
			h.files["proc/filesystems"] += "nodev\tselinuxfs\n"
			h.files["proc/self/mountinfo"] = "22 1 0:21 / /sys/fs/selinux2 rw,relatime shared:7 - selinuxfs selinuxfs rw\n"
			h.statfs["sys/fs/selinux2"] = unix.Statfs_t{Type: unix.SELINUX_MAGIC}
		}, want: func(n *podconfig.Node) { n.SELinuxEnabled = true }},

		// Masked paths: securitycontext's possibleCPUs.
		{name: "thermal throttle of possible CPUs", host: func(h *fakeHost) {
			h.files["sys/devices/system/cpu/possible"] = "0-7\n"
			h.files["sys/devices/system/cpu/cpu6/thermal_throttle/x"] = ""
		}, want: func(n *podconfig.Node) {
			n.ThermalThrottlePaths = append(n.ThermalThrottlePaths, "/sys/devices/system/cpu/cpu6/thermal_throttle")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost()
			if tc.host != nil {
				tc.host(h)
			}
			opts := h.options(t)
			if tc.opts != nil {
				tc.opts(&opts)
			}
			got, err := Discover(opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := base()
			if tc.want != nil {
				tc.want(&want)
			}
			// Huge page sizes come in the directory's order, as runc's.
			sort.Strings(got.HugePageSizes)
			if !equalAllocatable(got.Allocatable, want.Allocatable) {
				t.Errorf("allocatable %v\nwant        %v", got.Allocatable, want.Allocatable)
			}
			got.Allocatable, want.Allocatable = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("node\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func equalAllocatable(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if w, ok := b[name]; !ok || q.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// On this host: it does not fail and its values are sane.
func TestDiscoverOnThisHost(t *testing.T) {
	root := t.TempDir()
	n, err := Discover(Options{RootDir: root})
	if err != nil && strings.Contains(err.Error(), "can't get ip address") {
		t.Skipf("this host has no address kubelet would pick: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if n.Name == "" || n.Name != strings.ToLower(n.Name) {
		t.Errorf("name %q", n.Name)
	}
	if len(n.IPs) != 1 || net.ParseIP(n.IPs[0]) == nil {
		t.Errorf("IPs %v", n.IPs)
	}
	if n.RootDir != root || n.CgroupRoot != "/kubepods" || n.CgroupDriver != "cgroupfs" {
		t.Errorf("defaults: %+v", n)
	}
	if cpu := n.Allocatable.Cpu().Value(); cpu < 1 || cpu > 8192 {
		t.Errorf("cpu %d", cpu)
	}
	if mem := n.Allocatable.Memory().Value(); mem <= 0 || mem > n.MemoryCapacity || n.MemoryCapacity < 64<<20 {
		t.Errorf("memory %d of %d", mem, n.MemoryCapacity)
	}
	if s := n.Allocatable.StorageEphemeral().Value(); s <= 0 {
		t.Errorf("ephemeral-storage %d", s)
	}
	if p := n.Allocatable.Pods().Value(); p != 110 {
		t.Errorf("pods %d", p)
	}
	for _, s := range n.HugePageSizes {
		if !strings.HasSuffix(s, "B") {
			t.Errorf("huge page size %q", s)
		}
	}
	for _, p := range n.ThermalThrottlePaths {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("thermal throttle path %s: %v", p, err)
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err == nil && (st.Type == unix.CGROUP2_SUPER_MAGIC) != n.CgroupV2 {
		t.Errorf("cgroup v2 %v, statfs says %#x", n.CgroupV2, st.Type)
	}
	t.Logf("node: %+v", n)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
