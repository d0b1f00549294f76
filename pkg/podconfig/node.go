// Package podconfig turns a Pod into the CRI configs kubelet v1.36 sends
// for it: the PodSandboxConfig of generatePodSandboxConfig and the
// ContainerConfig of generateContainerConfig (pkg/kubelet/kuberuntime),
// field by field, so that a pod the agent creates from a manifest looks to
// the runtime (and to crictl inspectp/inspect) as the same pod under
// kubelet does.
//
// It is pure: no I/O, no clock, no globals. What kubelet learns from the
// host, its configuration or the runtime comes in as a Node; what it
// prepares on the host for a container (volumes, the termination-log file)
// comes in as a ContainerInput.
package podconfig

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// Kubelet's defaults for the directories Node leaves empty.
const (
	DefaultRootDir    = "/var/lib/kubelet"
	DefaultPodLogsDir = "/var/log/pods"
)

// Node is what kubelet knows of the node and of its own configuration that
// the configs depend on. The zero value of each field is kubelet's default
// where kubelet has one.
type Node struct {
	// Name is the node name (spec.nodeName, static pods' name suffix).
	Name string
	// IPs are the node's addresses in kubelet's order (status.hostIPs:
	// the first, then the first of the other family).
	IPs []string
	// RootDir is kubelet's --root-dir ("": /var/lib/kubelet).
	RootDir string
	// PodLogsDir is kubelet's podLogsDir ("": /var/log/pods).
	PodLogsDir string
	// ResolvConf is the node's resolv.conf (kubelet's resolvConf) parsed.
	ResolvConf ResolvConf
	// NoResolvConf is kubelet's resolvConf set to "": pods with the host's
	// DNS get 127.0.0.1 (or ::1) and search ".".
	NoResolvConf bool
	// ClusterDNS and ClusterDomain are kubelet's clusterDNS and
	// clusterDomain; without ClusterDNS, ClusterFirst falls back to Default.
	ClusterDNS    []string
	ClusterDomain string
	// Allocatable is the node's allocatable resources: a resourceFieldRef
	// on a limit the container does not set reads these.
	Allocatable corev1.ResourceList
	// MemoryCapacity is the node's memory in bytes (cAdvisor's
	// MemoryCapacity): a burstable container's oom_score_adj depends on it.
	MemoryCapacity int64
	// CgroupRoot is the cgroup of all pods ("/kubepods" with kubelet's
	// defaults): a pod's cgroup parent is <CgroupRoot>[/burstable|
	// /besteffort]/pod<uid>. "" leaves CgroupParent unset (the runtime's
	// default).
	CgroupRoot string
	// CgroupDriver is kubelet's cgroupDriver: "cgroupfs" (or "") or
	// "systemd" (kubepods-burstable-pod<uid>.slice names).
	CgroupDriver string
	// CgroupV2 is a unified cgroup hierarchy on the node.
	CgroupV2 bool
	// SingleProcessOOMKill is kubelet's singleProcessOOMKill; false (the
	// default on cgroup v2) sets memory.oom.group=1.
	SingleProcessOOMKill bool
	// SwapControllerAvailable is the node's memory cgroup accounting swap
	// (memory.swap.max on v2, memory.memsw on v1): kubelet then sets
	// NoSwap on every container (memorySwap.swapBehavior default).
	SwapControllerAvailable bool
	// NoCPUCFSQuota is kubelet's cpuCFSQuota set to false.
	NoCPUCFSQuota bool
	// CPUCFSQuotaPeriod is kubelet's cpuCFSQuotaPeriod (0: 100ms).
	CPUCFSQuotaPeriod time.Duration
	// HugePageSizes are the huge page sizes the node supports, as runc
	// names them ("2MB", "1GB"), in the order the host lists them: every
	// container gets a limit (0 unless it asks) for each.
	HugePageSizes []string
	// SELinuxEnabled is SELinux enabled on the node: only then do mounts
	// ask the runtime to relabel.
	SELinuxEnabled bool
	// SeccompDefault is kubelet's seccompDefault: containers without a
	// profile get RuntimeDefault instead of Unconfined.
	SeccompDefault bool
	// ThermalThrottlePaths are /sys/devices/system/cpu/cpu<N>/thermal_throttle
	// for each possible CPU where it exists, in CPU order: kubelet masks
	// them in every container besides its fixed list.
	ThermalThrottlePaths []string
	// RuntimeSupportsRRO is the runtime handler supporting recursive
	// read-only mounts (CRI RuntimeStatus). Kubelet without an API server
	// has no RuntimeClass manager and takes it as false.
	RuntimeSupportsRRO bool
}

func (n Node) rootDir() string {
	if n.RootDir == "" {
		return DefaultRootDir
	}
	return n.RootDir
}

func (n Node) podLogsDir() string {
	if n.PodLogsDir == "" {
		return DefaultPodLogsDir
	}
	return n.PodLogsDir
}

// IP is the node's first address (kubelet's first --node-ip), "" when it
// has none: its family is the one a pod's addresses are sorted by
// (podip.Sort).
func (n Node) IP() string {
	if len(n.IPs) == 0 {
		return ""
	}
	return n.IPs[0]
}

// Layout returns kubelet's directories under the node's RootDir and
// PodLogsDir.
func (n Node) Layout() Layout {
	return Layout{RootDir: n.rootDir(), PodLogsDir: n.podLogsDir()}
}

// Layout is where kubelet keeps a pod's files (pkg/kubelet's
// kubelet_getters.go and kuberuntime's log paths), kept identical so that
// tools written for kubelet's nodes find what they expect. It is the one
// statement of these paths: pkg/podfs makes and removes what they name.
type Layout struct {
	RootDir    string // kubelet's --root-dir
	PodLogsDir string // kubelet's podLogsDir
}

// RecordFileName is the agent's pod record in a pod directory
// (Layout.RecordFile). Kubelet has no such file: it knows its pods from its
// sources; the agent, after a restart, knows its own from this.
const RecordFileName = "cri-prober.json"

// Volume plugin directory names under a pod's volumes directory
// (kubernetes.io/<plugin> escaped as kubernetes.io~<plugin>).
const (
	PluginEmptyDir    = "kubernetes.io~empty-dir"
	PluginDownwardAPI = "kubernetes.io~downward-api"
	PluginProjected   = "kubernetes.io~projected"
	PluginConfigMap   = "kubernetes.io~configmap"
	PluginSecret      = "kubernetes.io~secret"
)

// PodsDir is <root>/pods (getPodsDir).
func (l Layout) PodsDir() string {
	return filepath.Join(l.RootDir, "pods")
}

// PodDir is <root>/pods/<uid> (getPodDir).
func (l Layout) PodDir(uid types.UID) string {
	return filepath.Join(l.PodsDir(), string(uid))
}

// VolumesDir is <root>/pods/<uid>/volumes (getPodVolumesDir).
func (l Layout) VolumesDir(uid types.UID) string {
	return filepath.Join(l.PodDir(uid), "volumes")
}

// VolumeDir is <root>/pods/<uid>/volumes/<plugin>/<name> (getPodVolumeDir),
// e.g. plugin PluginEmptyDir.
func (l Layout) VolumeDir(uid types.UID, plugin, name string) string {
	return filepath.Join(l.VolumesDir(uid), plugin, name)
}

// PluginsDir is <root>/pods/<uid>/plugins (getPodPluginsDir).
func (l Layout) PluginsDir(uid types.UID) string {
	return filepath.Join(l.PodDir(uid), "plugins")
}

// ReadyDir is the directory of an emptyDir volume's "ready" marker,
// <root>/pods/<uid>/plugins/kubernetes.io~empty-dir/<name> (emptyDir's
// getMetaDir, under getPodPluginDir). A downwardAPI or projected volume is
// an emptyDir named "wrapped_<name>" underneath
// (kubeletVolumeHost.NewWrapperMounter): its marker is under that name.
func (l Layout) ReadyDir(uid types.UID, name string) string {
	return filepath.Join(l.PluginsDir(uid), PluginEmptyDir, name)
}

// VolumeSubpathsDir is <root>/pods/<uid>/volume-subpaths
// (getPodVolumeSubpathsDir), where SubPathBindTarget's mounts live.
func (l Layout) VolumeSubpathsDir(uid types.UID) string {
	return filepath.Join(l.PodDir(uid), "volume-subpaths")
}

// RecordFile is <root>/pods/<uid>/cri-prober.json, the agent's pod record:
// that the pod directory is one of its static pods (pkg/podfs WriteRecord).
func (l Layout) RecordFile(uid types.UID) string {
	return filepath.Join(l.PodDir(uid), RecordFileName)
}

// ContainerDir is <root>/pods/<uid>/containers/<name>
// (getPodContainerDir): each start's termination-message file is a new
// file there, kubelet names it with 8 random hex digits.
func (l Layout) ContainerDir(uid types.UID, container string) string {
	return filepath.Join(l.PodDir(uid), "containers", container)
}

// EtcHosts is <root>/pods/<uid>/etc-hosts (getEtcHostsPath), the managed
// /etc/hosts of the pod's containers.
func (l Layout) EtcHosts(uid types.UID) string {
	return filepath.Join(l.PodDir(uid), "etc-hosts")
}

// SubPathBindTarget is where kubelet bind-mounts a subPath before handing
// it to the runtime (subpath_linux.go getSubpathBindTarget):
// <root>/pods/<uid>/volume-subpaths/<volume>/<container>/<mount index>.
func (l Layout) SubPathBindTarget(uid types.UID, volume, container string, mountIndex int) string {
	return filepath.Join(l.VolumeSubpathsDir(uid), volume, container, fmt.Sprint(mountIndex))
}

// SeccompDir is <root>/seccomp, where Localhost seccomp profiles live.
func (l Layout) SeccompDir() string {
	return filepath.Join(l.RootDir, "seccomp")
}

// PodLogsDirectory is <podLogsDir>/<ns>_<name>_<uid> (BuildPodLogsDirectory),
// the sandbox's LogDirectory.
func (l Layout) PodLogsDirectory(namespace, name string, uid types.UID) string {
	return filepath.Join(l.PodLogsDir, strings.Join([]string{namespace, name, string(uid)}, "_"))
}

// ContainerLogsDirectory is <pod logs directory>/<container>
// (BuildContainerLogsDirectory).
func (l Layout) ContainerLogsDirectory(namespace, name string, uid types.UID, container string) string {
	return filepath.Join(l.PodLogsDirectory(namespace, name, uid), container)
}

// ContainerLogPath is <container>/<attempt>.log, the ContainerConfig's
// LogPath relative to the sandbox's LogDirectory (buildContainerLogsPath).
func ContainerLogPath(container string, attempt int) string {
	return filepath.Join(container, fmt.Sprintf("%d.log", attempt))
}

// ResolvConf is a resolv.conf as kubelet reads it (parseResolvConf).
type ResolvConf struct {
	Nameservers []string
	Searches    []string
	Options     []string
}

// maxResolvConfLength is kubelet's limit on a resolv.conf (10 MiB).
const maxResolvConfLength = 10 << 20

// ParseResolvConf parses a resolv.conf as kubelet's parseResolvConf does:
// comments skipped, every nameserver kept, the last search line wins
// (without "." and trailing dots), options merged by name. A nameserver
// line without an address is an error (kubelet then fails every pod that
// uses the host's DNS), as is a file over 10 MiB.
func ParseResolvConf(data []byte) (ResolvConf, error) {
	if len(data) > maxResolvConfLength {
		return ResolvConf{}, errors.New("the read limit is reached")
	}
	rc := ResolvConf{Nameservers: []string{}, Searches: []string{}, Options: []string{}}
	var errs []error
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		fields := strings.Fields(trimmed)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) >= 2 {
				rc.Nameservers = append(rc.Nameservers, fields[1])
			} else {
				errs = append(errs, errors.New("nameserver list is empty "))
			}
		case "search":
			rc.Searches = []string{}
			for _, s := range fields[1:] {
				if s != "." {
					rc.Searches = append(rc.Searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			rc.Options = appendOptions(rc.Options, fields[1:]...)
		}
	}
	// Kubelet's utilerrors.NewAggregate: one message once, several as
	// "[a, b]", the same text only once.
	return rc, utilerrors.NewAggregate(errs)
}

// appendOptions is kubelet's appendOptions: an option replaces the one of
// the same name. Kubelet rebuilds the list from a map, in random order;
// here the first position of each name is kept.
func appendOptions(options []string, more ...string) []string {
	out := append([]string{}, options...)
	for _, opt := range more {
		name, _, _ := strings.Cut(opt, ":")
		replaced := false
		for i, old := range out {
			if n, _, _ := strings.Cut(old, ":"); n == name {
				out[i] = opt
				replaced = true
				break
			}
		}
		if !replaced {
			out = append(out, opt)
		}
	}
	return out
}
