// Package node learns the node as kubelet learns it from the host (Discover):
// its name and addresses, resolv.conf, capacity and allocatable with huge
// pages, the cgroup version and swap controller, SELinux and the paths
// kubelet masks. It gives out a podconfig.Node, the node every Pod's CRI
// configs and host side are made for, and imports pkg/podconfig and the
// leaf pkg/mountinfo only.
package node

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	"github.com/cri-prober/cri-prober/pkg/mountinfo"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

// Kubelet's defaults for what Options leaves empty.
const (
	// DefaultCgroupRoot is the cgroup of all pods with kubelet's defaults:
	// cgroupsPerQOS under the cgroup root "/" (the node allocatable
	// cgroup, cm's defaultNodeAllocatableCgroupName "kubepods").
	DefaultCgroupRoot = "/kubepods"
	// DefaultCgroupDriver is kubelet's cgroupDriver default.
	DefaultCgroupDriver = "cgroupfs"
	// DefaultMaxPods is kubelet's maxPods default: the node's pods capacity.
	DefaultMaxPods = 110
	// DefaultResolvConf is kubelet's resolvConf default.
	DefaultResolvConf = "/etc/resolv.conf"
)

// Options is what Discover takes from kubelet's configuration,
// and where it reads the host.
type Options struct {
	// HostnameOverride is kubelet's --hostname-override: the node's name
	// instead of the host's.
	HostnameOverride string
	// NodeIP is kubelet's --node-ip: the node's address, or a dual-stack
	// pair, comma separated. "" (or 0.0.0.0, or :: for IPv6 first) lets
	// Discover choose as kubelet does.
	NodeIP string
	// ResolvConf is kubelet's --resolv-conf: nil is /etc/resolv.conf
	// (under EtcRoot), "" none (Node.NoResolvConf).
	ResolvConf *string
	// RootDir is kubelet's --root-dir ("": /var/lib/kubelet), Node.RootDir:
	// the size of its file system is the node's ephemeral-storage.
	RootDir string
	// CgroupRoot is the cgroup of all pods, Node.CgroupRoot: "" is
	// "/kubepods" (DefaultCgroupRoot).
	CgroupRoot string
	// CgroupDriver is kubelet's cgroupDriver: "" is "cgroupfs".
	CgroupDriver string
	// MaxPods is kubelet's maxPods: 0 is 110.
	MaxPods int
	// Reserved is what kubelet's GetNodeAllocatableReservation takes from
	// the capacity for the allocatable: system-reserved, kube-reserved and
	// the hard eviction thresholds. Kubelet run on flags alone reserves
	// nothing (evictionHard has no default outside a config file); one run
	// with a config file reserves memory 100Mi and 10% of the root's file
	// system (eviction's DefaultEvictionHard).
	Reserved corev1.ResourceList
	// SingleProcessOOMKill is kubelet's singleProcessOOMKill on cgroup v2
	// (nil: false); on cgroup v1 kubelet always sets it.
	SingleProcessOOMKill *bool

	// ProcRoot, SysRoot and EtcRoot are where Discover reads /proc,
	// /sys and /etc ("": those). The paths it gives out (thermal throttle
	// paths) are the container's, under /sys.
	ProcRoot, SysRoot, EtcRoot string
	// Logger is for what kubelet logs and goes on (an invalid --node-ip
	// address, a swap controller it cannot find); zero discards.
	Logger klog.Logger

	host nodeHost // tests replace what is not a file
}

// nodeHost is what Discover asks of the host besides files.
type nodeHost struct {
	hostname   func() (string, error)
	lookupIP   func(host string) ([]net.IP, error)
	interfaces func() ([]net.Interface, error)
	addrs      func(net.Interface) ([]net.Addr, error)
	statfs     func(path string, st *unix.Statfs_t) error
}

func (h nodeHost) withDefaults() nodeHost {
	if h.hostname == nil {
		h.hostname = os.Hostname
	}
	if h.lookupIP == nil {
		h.lookupIP = net.LookupIP
	}
	if h.interfaces == nil {
		h.interfaces = net.Interfaces
	}
	if h.addrs == nil {
		h.addrs = func(i net.Interface) ([]net.Addr, error) { return i.Addrs() }
	}
	if h.statfs == nil {
		h.statfs = unix.Statfs
	}
	return h
}

// Discover learns every podconfig.Node field kubelet learns from the
// host, as kubelet learns it: the name (nodeutil.GetHostname), the
// addresses (nodestatus.NodeAddress), the resolv.conf (parsed as
// parseResolvConf does), the capacity and allocatable
// (cadvisor.CapacityFromMachineInfo, nodestatus.MachineInfo: cpu the
// online CPUs, memory MemTotal less the huge pages reserved, huge pages,
// ephemeral-storage the root's file system, pods 110, less Reserved), the
// memory capacity, the cgroup version (IsCgroup2UnifiedMode), the swap
// controller (checkSwapControllerAvailability), the huge page sizes (runc's
// HugePageSizes), SELinux (go-selinux's GetEnabled) and the thermal
// throttle paths kubelet masks (securitycontext's defaultMaskedPaths).
// The rest is opts' or kubelet's defaults; what kubelet learns from its
// configuration alone (ClusterDNS, ClusterDomain, PodLogsDir,
// SeccompDefault, CPU CFS quota) and from the runtime (RuntimeSupportsRRO)
// the caller sets on the result.
func Discover(opts Options) (podconfig.Node, error) {
	d := discovery{opts: opts, host: opts.host.withDefaults()}
	d.proc = orDefault(opts.ProcRoot, "/proc")
	d.sys = orDefault(opts.SysRoot, "/sys")
	d.etc = orDefault(opts.EtcRoot, "/etc")
	return d.node()
}

// Name is the node's name as kubelet learns it without a cloud
// provider (nodeutil.GetHostname): override, else the host's name,
// trimmed and lowercased. Discover names the node so.
func Name(override string) (string, error) {
	d := discovery{opts: Options{HostnameOverride: override}, host: nodeHost{}.withDefaults()}
	return d.hostname()
}

type discovery struct {
	opts           Options
	host           nodeHost
	proc, sys, etc string
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (d *discovery) node() (podconfig.Node, error) {
	n := podconfig.Node{
		RootDir:      filepath.Clean(orDefault(d.opts.RootDir, podconfig.DefaultRootDir)),
		CgroupRoot:   orDefault(d.opts.CgroupRoot, DefaultCgroupRoot),
		CgroupDriver: orDefault(d.opts.CgroupDriver, DefaultCgroupDriver),
	}
	var err error
	if n.Name, err = d.hostname(); err != nil {
		return n, err
	}
	if n.IPs, err = d.nodeIPs(n.Name); err != nil {
		return n, err
	}
	if d.opts.ResolvConf != nil && *d.opts.ResolvConf == "" {
		n.NoResolvConf = true
	} else {
		path := filepath.Join(d.etc, "resolv.conf")
		if d.opts.ResolvConf != nil {
			path = *d.opts.ResolvConf
		}
		if n.ResolvConf, err = readResolvConf(path); err != nil {
			return n, err
		}
	}
	if n.Allocatable, n.MemoryCapacity, err = d.allocatable(n.RootDir); err != nil {
		return n, err
	}
	n.CgroupV2 = d.cgroupV2()
	n.SingleProcessOOMKill = !n.CgroupV2 || (d.opts.SingleProcessOOMKill != nil && *d.opts.SingleProcessOOMKill)
	n.SwapControllerAvailable = d.swapControllerAvailable(n.CgroupV2)
	for _, hp := range d.hugePages() {
		n.HugePageSizes = append(n.HugePageSizes, hp.runcName)
	}
	n.SELinuxEnabled = d.selinuxEnabled()
	n.ThermalThrottlePaths = d.thermalThrottlePaths()
	return n, nil
}

// hostname is nodeutil.GetHostname: the override or the host's name,
// trimmed and lowercased; kubelet's node name without a cloud provider.
func (d *discovery) hostname() (string, error) {
	name := d.opts.HostnameOverride
	if name == "" {
		h, err := d.host.hostname()
		if err != nil {
			return "", fmt.Errorf("couldn't determine hostname: %w", err)
		}
		name = h
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return "", errors.New("empty hostname is invalid")
	}
	return strings.ToLower(name), nil
}

// nodeIPs is nodestatus.NodeAddress without a cloud provider, over
// --node-ip as ParseNodeIPArgument reads it: both addresses of a given
// dual-stack pair, a given address, the hostname when it is an address,
// the first address the node's name resolves to that is on the host (of
// the preferred family first), else the address of the interface of the
// default route (ResolveBindAddress, IPv4 first unless --node-ip is "::").
// A given address must be on the host (validateNodeIP).
func (d *discovery) nodeIPs(nodeName string) ([]string, error) {
	ips, err := d.parseNodeIP()
	if err != nil {
		return nil, err
	}
	var nodeIP, secondary net.IP
	if len(ips) > 0 {
		nodeIP = ips[0]
	}
	if len(ips) > 1 {
		secondary = ips[1]
	}
	preferIPv4 := nodeIP == nil || nodeIP.To4() != nil
	nodeIPSpecified := nodeIP != nil && !nodeIP.IsUnspecified()
	secondarySpecified := secondary != nil && !secondary.IsUnspecified()
	if nodeIPSpecified {
		if err := d.validateNodeIP(nodeIP); err != nil {
			return nil, fmt.Errorf("failed to validate nodeIP: %v", err)
		}
	}
	if secondarySpecified {
		if err := d.validateNodeIP(secondary); err != nil {
			return nil, fmt.Errorf("failed to validate secondaryNodeIP: %v", err)
		}
	}
	if nodeIPSpecified && secondarySpecified {
		return []string{nodeIP.String(), secondary.String()}, nil
	}
	var ip net.IP
	switch {
	case nodeIPSpecified:
		ip = nodeIP
	case netutils.ParseIPSloppy(nodeName) != nil:
		ip = netutils.ParseIPSloppy(nodeName)
	default:
		addrs, _ := d.host.lookupIP(nodeName)
		for _, a := range addrs {
			if d.validateNodeIP(a) != nil {
				continue
			}
			if (a.To4() != nil) == preferIPv4 {
				ip = a
				break
			}
			if ip == nil {
				ip = a
			}
		}
		if ip == nil {
			if ip, err = d.chooseHostInterface(preferIPv4); err != nil {
				return nil, fmt.Errorf("can't get ip address of node %s. error: %v", nodeName, err)
			}
		}
	}
	return []string{ip.String()}, nil
}

// parseNodeIP is nodeutil.ParseNodeIPArgument without a cloud provider:
// addresses that do not parse are ignored (kubelet logs them), at most a
// single address or a pair of both families, no unspecified one in a
// pair.
func (d *discovery) parseNodeIP() ([]net.IP, error) {
	if d.opts.NodeIP == "" {
		return nil, nil
	}
	var ips []net.IP
	var invalid []string
	for _, s := range strings.Split(d.opts.NodeIP, ",") {
		s = strings.TrimSpace(s)
		if ip := netutils.ParseIPSloppy(s); ip != nil {
			ips = append(ips, ip)
		} else {
			invalid = append(invalid, s)
		}
	}
	if len(invalid) > 0 {
		d.opts.Logger.Info("Could not parse some node IP(s), ignoring them", "IPs", invalid)
	}
	switch {
	case len(ips) > 2 || (len(ips) == 2 && (ips[0].To4() == nil) == (ips[1].To4() == nil)):
		return nil, fmt.Errorf("bad --node-ip %q: must contain either a single IP or a dual-stack pair of IPs", d.opts.NodeIP)
	case len(ips) == 2 && (ips[0].IsUnspecified() || ips[1].IsUnspecified()):
		return nil, fmt.Errorf("bad --node-ip %q: dual-stack node IP cannot include '0.0.0.0' or '::'", d.opts.NodeIP)
	}
	return ips, nil
}

// validateNodeIP is kubelet's validateNodeIP: an address of the host's
// interfaces, not loopback, multicast, link-local or unspecified.
func (d *discovery) validateNodeIP(ip net.IP) error {
	switch {
	case ip.To4() == nil && ip.To16() == nil:
		return errors.New("nodeIP must be a valid IP address")
	case ip.IsLoopback():
		return errors.New("nodeIP can't be loopback address")
	case ip.IsMulticast():
		return errors.New("nodeIP can't be a multicast address")
	case ip.IsLinkLocalUnicast():
		return errors.New("nodeIP can't be a link-local unicast address")
	case ip.IsUnspecified():
		return errors.New("nodeIP can't be an all zeros address")
	}
	ifaces, err := d.host.interfaces()
	if err != nil {
		return err
	}
	for _, iface := range ifaces {
		addrs, err := d.host.addrs(iface)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if addrIP(a).Equal(ip) {
				return nil
			}
		}
	}
	return fmt.Errorf("node IP: %q not found in the host's network interfaces", ip.String())
}

// addrIP is the address of an interface's net.Addr (kubelet reads them as
// CIDRs or addresses).
func addrIP(a net.Addr) net.IP {
	switch v := a.(type) {
	case *net.IPNet:
		return v.IP
	case *net.IPAddr:
		return v.IP
	}
	if ip, _, err := net.ParseCIDR(a.String()); err == nil {
		return ip
	}
	return net.ParseIP(a.String())
}

// route is a default route of /proc/net/route or /proc/net/ipv6_route.
type route struct {
	iface string
	v6    bool
}

// chooseHostInterface is apimachinery's util/net chooseHostInterface: the
// first global unicast address of the interface of a default route (or,
// that interface having none, of a loopback interface), of the preferred
// family first; without /proc/net/route, of any interface up.
func (d *discovery) chooseHostInterface(preferIPv4 bool) (net.IP, error) {
	families := []bool{false, true} // v6?
	if !preferIPv4 {
		families = []bool{true, false}
	}
	v4File := filepath.Join(d.proc, "net", "route")
	v6File := filepath.Join(d.proc, "net", "ipv6_route")
	if _, err := os.Stat(v4File); errors.Is(err, fs.ErrNotExist) {
		return d.chooseIPFromHostInterfaces(families)
	}
	routes, err := readRoutes(v4File, false)
	if err != nil {
		return nil, err
	}
	v6Routes, _ := readRoutes(v6File, true)
	routes = append(routes, v6Routes...)
	if len(routes) == 0 {
		return nil, fmt.Errorf("no default routes found in %q or %q", v4File, v6File)
	}
	ifaces, err := d.host.interfaces()
	if err != nil {
		return nil, err
	}
	for _, v6 := range families {
		for _, r := range routes {
			if r.v6 != v6 {
				continue
			}
			var iface *net.Interface
			for i := range ifaces {
				if ifaces[i].Name == r.iface {
					iface = &ifaces[i]
				}
			}
			if iface == nil {
				return nil, fmt.Errorf("route ip+net: no such network interface %s", r.iface)
			}
			if ip, err := d.globalIP(*iface, v6); err != nil || ip != nil {
				return ip, err
			}
			for _, lo := range ifaces {
				if lo.Flags&net.FlagLoopback == 0 {
					continue
				}
				if ip, err := d.globalIP(lo, v6); err != nil || ip != nil {
					return ip, err
				}
			}
		}
	}
	return nil, errors.New("unable to select an IP from default routes.")
}

// globalIP is getIPFromInterface: the first global unicast address of the
// family of an interface that is up; nil when it has none.
func (d *discovery) globalIP(iface net.Interface, v6 bool) (net.IP, error) {
	if iface.Flags&net.FlagUp == 0 {
		return nil, nil
	}
	addrs, err := d.host.addrs(iface)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		ip := addrIP(a)
		if ip != nil && (ip.To4() == nil) == v6 && ip.IsGlobalUnicast() {
			return ip, nil
		}
	}
	return nil, nil
}

// chooseIPFromHostInterfaces is util/net's: the first global unicast
// address of the family of any interface up that is neither loopback nor
// point-to-point.
func (d *discovery) chooseIPFromHostInterfaces(families []bool) (net.IP, error) {
	ifaces, err := d.host.interfaces()
	if err != nil {
		return nil, err
	}
	if len(ifaces) == 0 {
		return nil, errors.New("no interfaces found on host.")
	}
	for _, v6 := range families {
		for _, iface := range ifaces {
			if iface.Flags&(net.FlagLoopback|net.FlagPointToPoint) != 0 {
				continue
			}
			if ip, err := d.globalIP(iface, v6); err != nil || ip != nil {
				return ip, err
			}
		}
	}
	return nil, errors.New("no acceptable interface with global unicast address found on host")
}

// readRoutes reads the default routes of /proc/net/route
// (getIPv4DefaultRoutes: destination 0.0.0.0) or /proc/net/ipv6_route
// (getIPv6DefaultRoutes: destination ::, a gateway), in the file's order.
func readRoutes(path string, v6 bool) ([]route, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []route
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if v6 {
			if len(f) < 10 {
				continue
			}
			dest, err := hex.DecodeString(f[0])
			if err != nil || len(dest) != net.IPv6len {
				return nil, fmt.Errorf("invalid IPv6 address in route: %q", f[0])
			}
			gw, err := hex.DecodeString(f[4])
			if err != nil || len(gw) != net.IPv6len {
				return nil, fmt.Errorf("invalid IPv6 address in route: %q", f[4])
			}
			if net.IP(dest).Equal(net.IPv6zero) && !net.IP(gw).Equal(net.IPv6zero) {
				out = append(out, route{iface: f[9], v6: true})
			}
			continue
		}
		if len(f) < 3 || f[0] == "Iface" {
			continue
		}
		dest, err := hex.DecodeString(f[1])
		if err != nil || len(dest) != net.IPv4len {
			return nil, fmt.Errorf("invalid IPv4 address in route: %q", f[1])
		}
		if bytes.Equal(dest, []byte{0, 0, 0, 0}) {
			out = append(out, route{iface: f[0]})
		}
	}
	return out, nil
}

// readResolvConf reads and parses the node's resolv.conf as kubelet's
// getHostDNSConfig does (at most 10 MiB read). Kubelet would fail, at each
// pod's DNS config, the pods that use the host's DNS; the agent fails at
// once.
func readResolvConf(path string) (podconfig.ResolvConf, error) {
	f, err := os.Open(path)
	if err != nil {
		return podconfig.ResolvConf{}, fmt.Errorf("resolv.conf: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 10<<20+1))
	if err != nil {
		return podconfig.ResolvConf{}, fmt.Errorf("resolv.conf: %w", err)
	}
	rc, err := podconfig.ParseResolvConf(data)
	if err != nil {
		return podconfig.ResolvConf{}, fmt.Errorf("parsing %s: %w", path, err)
	}
	return rc, nil
}

// hugePage is a huge page size of the node (/sys/kernel/mm/hugepages).
type hugePage struct {
	kB       int64
	pages    int64  // nr_hugepages: reserved, counted in capacity
	runcName string // runc's HugePageSizes name: "2MB", "1GB"
}

// hugePages lists /sys/kernel/mm/hugepages in the directory's order, as
// runc's HugePageSizes and cadvisor's GetHugePagesInfo read it; a name
// they skip is skipped, an unreadable count is 0. No directory: none.
func (d *discovery) hugePages() []hugePage {
	dir := filepath.Join(d.sys, "kernel", "mm", "hugepages")
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil
	}
	var out []hugePage
	for _, name := range names {
		v, ok := strings.CutPrefix(name, "hugepages-")
		if !ok {
			continue
		}
		v, ok = strings.CutSuffix(v, "kB")
		if !ok {
			continue
		}
		kB, err := strconv.ParseInt(v, 10, 64)
		if err != nil || kB <= 0 {
			continue
		}
		hp := hugePage{kB: kB}
		switch {
		case kB >= 1<<20:
			hp.runcName = strconv.FormatInt(kB>>20, 10) + "GB"
		case kB >= 1<<10:
			hp.runcName = strconv.FormatInt(kB>>10, 10) + "MB"
		default:
			hp.runcName = v + "KB"
		}
		if data, err := os.ReadFile(filepath.Join(dir, name, "nr_hugepages")); err == nil {
			fmt.Sscanf(string(data), "%d", &hp.pages)
		}
		out = append(out, hp)
	}
	return out
}

var memTotal = regexp.MustCompile(`MemTotal:\s*([0-9]+) kB`)

// allocatable is the node's capacity (cadvisor.CapacityFromMachineInfo,
// with the root's file system as ephemeral-storage and maxPods pods) less
// Reserved, less the huge pages reserved from memory (nodestatus'
// MachineInfo); memoryCapacity is cadvisor's MemoryCapacity, MemTotal.
func (d *discovery) allocatable(rootDir string) (corev1.ResourceList, int64, error) {
	meminfo, err := os.ReadFile(filepath.Join(d.proc, "meminfo"))
	if err != nil {
		return nil, 0, fmt.Errorf("reading the node's memory: %w", err)
	}
	m := memTotal.FindSubmatch(meminfo)
	if m == nil {
		return nil, 0, fmt.Errorf("no MemTotal in %s", filepath.Join(d.proc, "meminfo"))
	}
	kB, err := strconv.ParseInt(string(m[1]), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("MemTotal: %w", err)
	}
	memory := kB * 1024
	storage, err := d.fsCapacity(rootDir)
	if err != nil {
		return nil, 0, err
	}
	maxPods := d.opts.MaxPods
	if maxPods <= 0 {
		maxPods = DefaultMaxPods
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(int64(d.onlineCPUs())*1000, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memory, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(storage, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	for _, hp := range d.hugePages() {
		size := resource.NewQuantity(hp.kB*1024, resource.BinarySI)
		capacity[corev1.ResourceName(corev1.ResourceHugePagesPrefix+size.String())] = *resource.NewQuantity(hp.kB*1024*hp.pages, resource.BinarySI)
	}
	alloc := corev1.ResourceList{}
	for name, q := range capacity {
		v := q.DeepCopy()
		if r, ok := d.opts.Reserved[name]; ok {
			v.Sub(r)
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		alloc[name] = v
	}
	mem := alloc[corev1.ResourceMemory]
	for name, q := range capacity {
		if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			mem.Sub(q)
		}
	}
	if mem.Sign() < 0 {
		mem.Set(0)
	}
	alloc[corev1.ResourceMemory] = mem
	return alloc, memory, nil
}

// onlineCPUs is cadvisor's NumCores: the CPUs online
// (/sys/devices/system/cpu/online); without it, the CPUs Go sees.
func (d *discovery) onlineCPUs() int {
	data, err := os.ReadFile(filepath.Join(d.sys, "devices", "system", "cpu", "online"))
	if err != nil {
		return runtime.NumCPU()
	}
	cpus, ok := parseCPUList(string(data))
	if !ok || len(cpus) == 0 {
		return runtime.NumCPU()
	}
	return len(cpus)
}

// parseCPUList parses a kernel CPU list ("0-3,5"), as kubelet's
// possibleCPUs and cadvisor's isCPUOnline do.
func parseCPUList(s string) ([]int, bool) {
	var cpus []int
	for _, r := range strings.Split(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		start, err := strconv.Atoi(lo)
		if err != nil {
			return nil, false
		}
		end := start
		if isRange {
			if end, err = strconv.Atoi(hi); err != nil || end < start {
				return nil, false
			}
		}
		for i := start; i <= end; i++ {
			cpus = append(cpus, i)
		}
	}
	return cpus, true
}

// fsCapacity is cadvisor's capacity of the file system holding dir
// (GetDirFsInfo: f_frsize × f_blocks); a dir not made yet is on its
// nearest existing parent's.
func (d *discovery) fsCapacity(dir string) (int64, error) {
	for p := dir; ; p = filepath.Dir(p) {
		var st unix.Statfs_t
		err := d.host.statfs(p, &st)
		if err == nil {
			return int64(st.Frsize) * int64(st.Blocks), nil
		}
		if !errors.Is(err, unix.ENOENT) || p == filepath.Dir(p) {
			return 0, fmt.Errorf("the file system of %s: %w", dir, err)
		}
	}
}

// cgroupV2 is runc's IsCgroup2UnifiedMode: /sys/fs/cgroup is a cgroup2
// file system.
func (d *discovery) cgroupV2() bool {
	var st unix.Statfs_t
	if err := d.host.statfs(filepath.Join(d.sys, "fs", "cgroup"), &st); err != nil {
		return false
	}
	return st.Type == unix.CGROUP2_SUPER_MAGIC
}

// swapControllerAvailable is kubelet's checkSwapControllerAvailability:
// memory.memsw.limit_in_bytes in the v1 memory hierarchy, or
// memory.swap.max in the agent's own cgroup on v2 (the root has none).
func (d *discovery) swapControllerAvailable(v2 bool) bool {
	p := filepath.Join(d.sys, "fs", "cgroup", "memory", "memory.memsw.limit_in_bytes")
	if v2 {
		data, err := os.ReadFile(filepath.Join(d.proc, "self", "cgroup"))
		if err != nil {
			d.opts.Logger.V(5).Info("Failed to detect the availability of the swap controller, assuming not available", "err", err)
			return false
		}
		self := ""
		for _, line := range strings.Split(string(data), "\n") {
			// runc's ParseCgroupFile: id:controllers:path; v2's is 0::path.
			parts := strings.SplitN(line, ":", 3)
			if len(parts) == 3 && parts[1] == "" {
				self = parts[2]
			}
		}
		p = filepath.Join(d.sys, "fs", "cgroup", self, "memory.swap.max")
	}
	_, err := os.Stat(p)
	return err == nil
}

// selinuxEnabled is go-selinux's GetEnabled: a selinuxfs mounted read-write
// (at /sys/fs/selinux, or where the mount table says when the kernel has
// one), and the agent's label not "kernel".
func (d *discovery) selinuxEnabled() bool {
	if !d.selinuxfsMounted() {
		return false
	}
	label, _ := os.ReadFile(filepath.Join(d.proc, "thread-self", "attr", "current"))
	if label == nil {
		label, _ = os.ReadFile(filepath.Join(d.proc, "self", "attr", "current"))
	}
	return strings.TrimRight(string(label), "\x00\n") != "kernel"
}

func (d *discovery) selinuxfsMounted() bool {
	verify := func(path string) bool {
		var st unix.Statfs_t
		if err := d.host.statfs(path, &st); err != nil {
			return false
		}
		return uint32(st.Type) == uint32(unix.SELINUX_MAGIC) && st.Flags&unix.ST_RDONLY == 0
	}
	if verify(filepath.Join(d.sys, "fs", "selinux")) {
		return true
	}
	filesystems, err := os.ReadFile(filepath.Join(d.proc, "filesystems"))
	if err != nil || !bytes.Contains(filesystems, []byte("\tselinuxfs\n")) {
		return false
	}
	f, err := os.Open(filepath.Join(d.proc, "self", "mountinfo"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, " - selinuxfs ") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		mnt := mountinfo.Unescape(fields[4])
		// A mount point under /sys is read under SysRoot.
		if rest, ok := strings.CutPrefix(mnt, "/sys/"); ok {
			mnt = filepath.Join(d.sys, rest)
		}
		if verify(mnt) {
			return true
		}
	}
	return false
}

// thermalThrottlePaths is the end of securitycontext's defaultMaskedPaths:
// /sys/devices/system/cpu/cpu<N>/thermal_throttle of each possible CPU
// (/sys/devices/system/cpu/possible, else as many as Go sees) where it
// exists, in CPU order.
func (d *discovery) thermalThrottlePaths() []string {
	var cpus []int
	if data, err := os.ReadFile(filepath.Join(d.sys, "devices", "system", "cpu", "possible")); err == nil {
		cpus, _ = parseCPUList(string(data))
	}
	if cpus == nil {
		for i := range runtime.NumCPU() {
			cpus = append(cpus, i)
		}
	}
	var out []string
	for _, cpu := range cpus {
		rel := fmt.Sprintf("devices/system/cpu/cpu%d/thermal_throttle", cpu)
		if _, err := os.Stat(filepath.Join(d.sys, rel)); err == nil {
			out = append(out, "/sys/"+rel)
		}
	}
	return out
}
