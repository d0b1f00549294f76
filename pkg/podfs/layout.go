package podfs

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Directory and file names of kubelet's layout under its --root-dir
// (pkg/kubelet/kubeletconfig/defaults.go, kubelet_getters.go), kept
// identical so that tools written for kubelet's nodes find what they expect.
const (
	podsDirName           = "pods"            // DefaultKubeletPodsDirName
	volumesDirName        = "volumes"         // DefaultKubeletVolumesDirName
	volumeSubpathsDirName = "volume-subpaths" // DefaultKubeletVolumeSubpathsDirName
	pluginsDirName        = "plugins"         // DefaultKubeletPluginsDirName
	containersDirName     = "containers"      // DefaultKubeletContainersDirName
	etcHostsFileName      = "etc-hosts"       // getEtcHostsPath
	readyFileName         = "ready"           // volume/util.SetReady

	// OwnerFileName is the agent's ownership record in a pod directory
	// (RecordOwner). kubelet has no such file: it knows its pods from its
	// sources; the agent, after a restart, knows its own from this.
	OwnerFileName = "cri-prober.json"
)

// Volume plugin directory names: kubelet's plugin names escaped by
// utilstrings.EscapeQualifiedName ("/" becomes "~").
const (
	EmptyDirPlugin    = "kubernetes.io~empty-dir"
	DownwardAPIPlugin = "kubernetes.io~downward-api"
	ProjectedPlugin   = "kubernetes.io~projected"
)

// Layout computes kubelet's paths under a root directory (kubelet's
// --root-dir, /var/lib/kubelet by default). It touches nothing.
type Layout struct {
	Root string
}

// PodsDir is <root>/pods (getPodsDir).
func (l Layout) PodsDir() string { return filepath.Join(l.Root, podsDirName) }

// PodDir is <root>/pods/<uid> (getPodDir).
func (l Layout) PodDir(uid string) string { return filepath.Join(l.PodsDir(), uid) }

// VolumesDir is <pod>/volumes (getPodVolumesDir).
func (l Layout) VolumesDir(uid string) string {
	return filepath.Join(l.PodDir(uid), volumesDirName)
}

// VolumeDir is <pod>/volumes/<plugin>/<name> (getPodVolumeDir); plugin is
// the escaped name, e.g. EmptyDirPlugin.
func (l Layout) VolumeDir(uid, plugin, name string) string {
	return filepath.Join(l.VolumesDir(uid), plugin, name)
}

// EmptyDir is where the emptyDir volume name lives (emptydir.getPath).
func (l Layout) EmptyDir(uid, name string) string { return l.VolumeDir(uid, EmptyDirPlugin, name) }

// DownwardAPIDir is where the downwardAPI volume name lives.
func (l Layout) DownwardAPIDir(uid, name string) string {
	return l.VolumeDir(uid, DownwardAPIPlugin, name)
}

// ProjectedDir is where the projected volume name lives.
func (l Layout) ProjectedDir(uid, name string) string {
	return l.VolumeDir(uid, ProjectedPlugin, name)
}

// PluginsDir is <pod>/plugins (getPodPluginsDir).
func (l Layout) PluginsDir(uid string) string {
	return filepath.Join(l.PodDir(uid), pluginsDirName)
}

// ReadyDir is the directory of a volume's "ready" marker:
// <pod>/plugins/kubernetes.io~empty-dir/<name> (emptyDir.getMetaDir).
// downwardAPI and projected volumes are emptyDirs named "wrapped_<name>"
// underneath (kubeletVolumeHost.NewWrapperMounter), so theirs is under
// that name.
func (l Layout) ReadyDir(uid, name string) string {
	return filepath.Join(l.PluginsDir(uid), EmptyDirPlugin, name)
}

// VolumeSubpathsDir is <pod>/volume-subpaths (getPodVolumeSubpathsDir).
func (l Layout) VolumeSubpathsDir(uid string) string {
	return filepath.Join(l.PodDir(uid), volumeSubpathsDirName)
}

// SubPathTarget is where the subPath of a container's volumeMount number
// index is bind-mounted: <pod>/volume-subpaths/<volume>/<container>/<index>
// (subpath.getSubpathBindTarget).
func (l Layout) SubPathTarget(uid, volume, container string, index int) string {
	return filepath.Join(l.VolumeSubpathsDir(uid), volume, container, strconv.Itoa(index))
}

// ContainerDir is <pod>/containers/<name> (getPodContainerDir), which holds
// the container's termination message files.
func (l Layout) ContainerDir(uid, container string) string {
	return filepath.Join(l.PodDir(uid), containersDirName, container)
}

// EtcHosts is <pod>/etc-hosts (getEtcHostsPath).
func (l Layout) EtcHosts(uid string) string {
	return filepath.Join(l.PodDir(uid), etcHostsFileName)
}

// OwnerFile is <pod>/cri-prober.json (RecordOwner).
func (l Layout) OwnerFile(uid string) string {
	return filepath.Join(l.PodDir(uid), OwnerFileName)
}

// PodLogsDir is kubelet's log directory of a pod,
// <podLogsDir>/<namespace>_<name>_<uid> (kuberuntime.BuildPodLogsDirectory).
func PodLogsDir(podLogsDir, namespace, name, uid string) string {
	return filepath.Join(podLogsDir, strings.Join([]string{namespace, name, uid}, "_"))
}

// checkElem accepts a name that is one path element: a pod UID, a volume
// or container name. Kubernetes validation already allows no other, but the
// agent reads manifests from disk, so a name that would leave its directory
// is refused here too.
func checkElem(what, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%s %q: must be a single path element", what, name)
	}
	return nil
}
