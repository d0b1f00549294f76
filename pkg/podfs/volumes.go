package podfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

// FailedMountReason is the reason of the event kubelet records for a
// MountError.
const FailedMountReason = "FailedMount"

// MountError is the failure to set up one volume. Its text is kubelet's
// FailedMount event message: `MountVolume.SetUp failed for volume "x" :
// hostPath type check failed: /p is not a directory`.
type MountError struct {
	Volume string
	Err    error
}

func (e *MountError) Error() string {
	// operationexecutor's GenerateError("MountVolume.SetUp failed", err)
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.Volume, e.Err)
}

func (e *MountError) Unwrap() error { return e.Err }

// SetUpError is SetUp's error when volumes failed: one MountError each,
// in the pod's order of volumes. errors.As finds each MountError.
type SetUpError struct {
	Failed []*MountError
}

func (e *SetUpError) Error() string {
	msgs := make([]string, len(e.Failed))
	for i, f := range e.Failed {
		msgs[i] = f.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e *SetUpError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f
	}
	return errs
}

const tmpfsNoswap = "noswap" // swap.TmpfsNoswapOption

// SetUp makes the pod's volumes on the host and returns each by name, as
// podconfig.ContainerInput takes them, as kubelet's volume manager does
// before the pod's containers start (each volume plugin's SetUp;
// makePodDataDirs before). It may be called again at any time: what is
// made is kept (an emptyDir's files, a mounted tmpfs), what is missing is
// made, downwardAPI files are brought up to date. Each volume is set up on
// its own: the ones that failed are in the *SetUpError returned with the
// others.
//
// pod is the pod as podconfig gets it (defaulted, its static identity
// applied): downwardAPI files read its metadata (podconfig's
// ExtractFieldPath) and resources (ResourceValue, over the node's
// allocatable), and a memory-backed volume is bounded by its memory limit
// (podconfig's PodMemoryLimit), as kubelet's plugins do.
//
// The pod directory must have the agent's record (WriteRecord first).
// Volume kinds: emptyDir (medium "" or Memory), hostPath and downwardAPI
// (what a static pod may use without an API server; kubelet without one
// fails projected volumes, whatever their sources). An image volume is the runtime's (a CRI Mount
// with an image: the caller adds podconfig.Volume{Image: ...}) and is left
// out of the result. Any other kind fails.
func (m *Manager) SetUp(ctx context.Context, pod *corev1.Pod) (map[string]podconfig.Volume, error) {
	if pod == nil {
		return nil, errors.New("podfs: SetUp of a nil pod")
	}
	uid := string(pod.UID)
	if err := checkElem("pod UID", uid); err != nil {
		return nil, err
	}
	defer m.lockPod(uid)()
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "podUID", uid)

	if _, err := m.readRecord(uid); err != nil {
		return nil, fmt.Errorf("setting up the volumes of pod %s: %w", uid, err)
	}
	// makePodDataDirs
	for _, dir := range []string{m.layout.VolumesDir(pod.UID), m.layout.PluginsDir(pod.UID)} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("setting up the volumes of pod %s: %w", uid, err)
		}
	}
	mps, err := m.mnt.mounts(m.layout.PodDir(pod.UID))
	if err != nil {
		return nil, fmt.Errorf("setting up the volumes of pod %s: %w", uid, err)
	}

	s := setup{m: m, logger: logger, pod: pod, mounts: mps, own: podOwnership(pod)}
	out := make(map[string]podconfig.Volume, len(pod.Spec.Volumes))
	var failed []*MountError
	for i := range pod.Spec.Volumes {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		v := &pod.Spec.Volumes[i]
		if v.Image != nil {
			continue
		}
		vol, err := s.volume(v)
		if err != nil {
			failed = append(failed, &MountError{Volume: v.Name, Err: err})
			logger.Error(err, "MountVolume.SetUp failed", "volume", v.Name)
			continue
		}
		logger.V(2).Info("MountVolume.SetUp succeeded", "volume", v.Name, "path", vol.HostPath)
		out[v.Name] = vol
	}
	if len(failed) > 0 {
		return out, &SetUpError{Failed: failed}
	}
	return out, nil
}

// setup is one SetUp call.
type setup struct {
	m      *Manager
	logger klog.Logger
	pod    *corev1.Pod
	mounts []mountPoint
	own    ownership
}

// volume sets up v where podconfig's VolumeFor places it, with the
// attributes it gives (kubelet's plugins' GetPath and GetAttributes).
func (s *setup) volume(v *corev1.Volume) (podconfig.Volume, error) {
	if err := checkElem("volume name", v.Name); err != nil {
		return podconfig.Volume{}, err
	}
	vol, _ := podconfig.VolumeFor(s.pod, v, s.m.node)
	switch {
	case v.HostPath != nil:
		return vol, setUpHostPath(v.HostPath)
	case v.EmptyDir != nil:
		return vol, s.emptyDir(v.Name, vol.HostPath, v.EmptyDir.Medium, v.EmptyDir.SizeLimit)
	case v.DownwardAPI != nil:
		payload, err := s.downwardAPIData(v.DownwardAPI.Items, v.DownwardAPI.DefaultMode, corev1.DownwardAPIVolumeSourceDefaultMode)
		if err != nil {
			return podconfig.Volume{}, err
		}
		return vol, s.apiVolume(v.Name, vol.HostPath, payload)
	default:
		return podconfig.Volume{}, fmt.Errorf("%s volumes are not supported in a pod cri-prober runs: a static pod may use emptyDir, hostPath and downwardAPI volumes", volumeKind(v))
	}
}

// emptyDir is emptyDir.SetUpAt for the volume name at dir.
func (s *setup) emptyDir(name, dir string, medium corev1.StorageMedium, sizeLimit *resource.Quantity) error {
	readyDir := s.m.layout.ReadyDir(s.pod.UID, name)
	if isReady(readyDir) {
		switch medium {
		case corev1.StorageMediumMemory:
			if isMountOf(s.mounts, dir, "tmpfs") {
				return nil
			}
		case corev1.StorageMediumDefault:
			if _, err := os.Stat(dir); err == nil {
				return nil
			}
			// Made, then removed by hand: made again.
			s.logger.Info("Volume ready file exists but not the volume directory: making it again", "readyDir", readyDir, "path", dir)
			if err := os.RemoveAll(readyDir); err != nil {
				return err
			}
		}
	}
	var err error
	switch {
	case medium == corev1.StorageMediumDefault:
		// Disk: sizeLimit is not enforced here. kubelet's eviction
		// manager evicts a pod whose emptyDir outgrows it (and may use
		// project quotas); the agent has no eviction manager and does
		// neither: the volume can fill its file system.
		err = setupDir(dir)
	case medium == corev1.StorageMediumMemory:
		// Memory: the tmpfs' size enforces the limit (writes fail with
		// ENOSPC), as under kubelet.
		err = s.setupTmpfs(dir, s.m.memorySize(sizeLimit, podconfig.PodMemoryLimit(s.pod)))
	case medium == corev1.StorageMediumHugePages || strings.HasPrefix(string(medium), string(corev1.StorageMediumHugePagesPrefix)):
		err = fmt.Errorf("emptyDir medium %q: hugepages volumes are not supported by cri-prober", medium)
	default:
		err = fmt.Errorf("unknown storage medium %q", medium)
	}
	if err != nil {
		return err
	}
	// The fsGroup: kubelet ignores its error here.
	if perr := s.own.apply(s.logger, dir, false); perr != nil {
		s.logger.Error(perr, "Changing the ownership of a volume failed", "volume", name, "path", dir)
	}
	return setReady(readyDir)
}

// setupTmpfs is emptyDir.setupTmpfs: the directory, then a tmpfs on it
// unless one is mounted there already.
func (s *setup) setupTmpfs(dir string, size int64) error {
	if err := setupDir(dir); err != nil {
		return err
	}
	if isMountOf(s.mounts, dir, "tmpfs") {
		return nil
	}
	// generateTmpfsMountOptions
	var options []string
	if size > 0 {
		options = append(options, fmt.Sprintf("size=%d", size))
	}
	options = append(options, tmpfsNoswap)
	s.logger.V(3).Info("Mounting tmpfs for volume", "path", dir, "options", options)
	if err := s.m.mnt.mountTmpfs(dir, options); err != nil {
		return err
	}
	s.mounts = append(s.mounts, mountPoint{path: dir, fsType: "tmpfs"})
	return nil
}

// memorySize is calculateEmptyDirMemorySize: the node's allocatable
// memory, or the pod's memory limit (podconfig's PodMemoryLimit, kubelet's
// pod cgroup limit) when positive and no larger, or the volume's sizeLimit
// when positive and no larger still. Kubelet always knows its node's
// allocatable memory; a Node without one (0) makes the size 0 as it would
// in kubelet: no size option, the kernel's default of half the RAM.
func (m *Manager) memorySize(sizeLimit *resource.Quantity, podLimit int64) int64 {
	size := m.node.Allocatable.Memory().DeepCopy()
	if pl := resource.NewQuantity(podLimit, resource.BinarySI); pl.Sign() > 0 && pl.Cmp(size) <= 0 {
		size = *pl
	}
	if sizeLimit != nil && sizeLimit.Sign() > 0 && sizeLimit.Cmp(size) <= 0 {
		size = sizeLimit.DeepCopy()
	}
	return size.Value()
}

// setupDir is emptyDir.setupDir: the directory, 0777 whatever the umask.
func setupDir(dir string) error {
	const perm = 0o777
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm() != perm {
		return os.Chmod(dir, perm)
	}
	return nil
}

// readyFile is volume/util's readyFileName.
const readyFile = "ready"

// isReady and setReady are volume/util's IsReady and SetReady: the
// "ready" file kubelet leaves in a volume's plugin directory once it is
// set up.
func isReady(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, readyFile))
	return err == nil && fi.Mode().IsRegular()
}

func setReady(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, readyFile))
	if err != nil {
		return err
	}
	return f.Close()
}

// apiVolume sets up a downwardAPI or projected volume at dir as their
// plugins' SetUpAt: an emptyDir of medium Memory named "wrapped_<name>"
// (the data lives in RAM, no larger than the pod's memory), the mount
// points of volumes mounted inside it (MakeNestedMountpoints), then the
// payload by the atomic writer, with the fsGroup applied before it is
// published. On failure the volume is torn down, as they do.
func (s *setup) apiVolume(name, dir string, payload map[string]fileProjection) (err error) {
	wrapped := "wrapped_" + name
	if err := s.emptyDir(wrapped, dir, corev1.StorageMediumMemory, nil); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if terr := s.tearDownWrapped(wrapped, dir); terr != nil {
				s.logger.Error(terr, "Tearing down a volume after its failed setup", "volume", name)
			}
		}
	}()
	if err := makeNestedMountpoints(name, dir, s.pod); err != nil {
		return err
	}
	w := atomicWriter{dir: dir, now: s.m.clock.Now}
	return w.write(payload, func(string) error {
		// The whole volume, not only the new directory: the links and
		// directories made outside it the first time too.
		return s.own.apply(s.logger, dir, true)
	})
}

// tearDownWrapped is emptyDir.TearDownAt of a wrapped volume: its ready
// file, the tmpfs, the directory.
func (s *setup) tearDownWrapped(wrapped, dir string) error {
	if err := os.RemoveAll(s.m.layout.ReadyDir(s.pod.UID, wrapped)); err != nil {
		return err
	}
	if err := s.m.mnt.unmount(dir); err != nil {
		return err
	}
	s.mounts = slices.DeleteFunc(s.mounts, func(mp mountPoint) bool { return mp.path == dir })
	return os.RemoveAll(dir)
}

// downwardAPIData is downwardapi.CollectData: a fieldRef's value is
// podconfig's ExtractFieldPath of the pod, a resourceFieldRef's its
// ResourceValue over the node's allocatable, and the errors of all items
// are aggregated. A nil defaultMode is the API's default (the manifest was
// not defaulted: kubelet's would have been).
func (s *setup) downwardAPIData(items []corev1.DownwardAPIVolumeFile, defaultMode *int32, apiDefault int32) (map[string]fileProjection, error) {
	mode := apiDefault
	if defaultMode != nil {
		mode = *defaultMode
	}
	var errs []error
	data := make(map[string]fileProjection, len(items))
	for _, item := range items {
		fp := fileProjection{mode: mode}
		if item.Mode != nil {
			fp.mode = *item.Mode
		}
		switch {
		case item.FieldRef != nil:
			if v, err := podconfig.ExtractFieldPath(s.pod, item.FieldRef.FieldPath); err != nil {
				errs = append(errs, err)
			} else {
				fp.data = []byte(v)
			}
		case item.ResourceFieldRef != nil:
			if v, err := podconfig.ResourceValue(item.ResourceFieldRef, s.pod, s.m.node.Allocatable); err != nil {
				errs = append(errs, err)
			} else {
				fp.data = []byte(v)
			}
		}
		data[filepath.Clean(item.Path)] = fp
	}
	return data, utilerrors.NewAggregate(errs)
}

// setUpHostPath is hostPathMounter.SetUp: no ".." in the path, then the
// type check.
func setUpHostPath(src *corev1.HostPathVolumeSource) error {
	if err := podconfig.ValidatePathNoBacksteps(src.Path); err != nil {
		return fmt.Errorf("invalid HostPath `%s`: %v", src.Path, err)
	}
	t := corev1.HostPathUnset
	if src.Type != nil {
		t = *src.Type
	}
	if t == corev1.HostPathUnset {
		return nil
	}
	return checkHostPathType(src.Path, t)
}

// checkHostPathType is host_path.go's checkTypeInternal with its texts.
// Links are followed, as kubelet's os.Stat does: the path is the
// manifest author's, on the host.
func checkHostPathType(path string, t corev1.HostPathType) error {
	fi, statErr := os.Stat(path)
	exists := statErr == nil
	is := func(want fs.FileMode) bool { return exists && fileType(fi) == want }
	switch t {
	case corev1.HostPathDirectoryOrCreate:
		if !exists {
			// makeDir: MkdirAll 0755 (under the umask, as kubelet's).
			if err := os.MkdirAll(path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			return nil
		}
		fallthrough
	case corev1.HostPathDirectory:
		if !is(fs.ModeDir) {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", path)
		}
	case corev1.HostPathFileOrCreate:
		if !exists {
			// makeFile: O_CREATE 0644 (under the umask).
			f, err := os.OpenFile(path, os.O_CREATE, 0o644)
			if f != nil {
				f.Close()
			}
			if err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			return nil
		}
		fallthrough
	case corev1.HostPathFile:
		if !is(0) {
			return fmt.Errorf("hostPath type check failed: %s is not a file", path)
		}
	case corev1.HostPathSocket:
		if !is(fs.ModeSocket) {
			return fmt.Errorf("hostPath type check failed: %s is not a socket file", path)
		}
	case corev1.HostPathCharDev:
		if !is(fs.ModeDevice | fs.ModeCharDevice) {
			return fmt.Errorf("hostPath type check failed: %s is not a character device", path)
		}
	case corev1.HostPathBlockDev:
		if !is(fs.ModeDevice) {
			return fmt.Errorf("hostPath type check failed: %s is not a block device", path)
		}
	default:
		return fmt.Errorf("%s is an invalid volume type", t)
	}
	return nil
}

// fileType is hostutil's getFileType: the kind of file, 0 for a regular
// one, and an unknown kind as 1 (matching none).
func fileType(fi fs.FileInfo) fs.FileMode {
	mode := fi.Mode()
	switch {
	case mode.IsDir():
		return fs.ModeDir
	case mode.IsRegular():
		return 0
	case mode&fs.ModeSocket != 0:
		return fs.ModeSocket
	case mode&fs.ModeDevice != 0 && mode&fs.ModeCharDevice != 0:
		return fs.ModeDevice | fs.ModeCharDevice
	case mode&fs.ModeDevice != 0:
		return fs.ModeDevice
	}
	return 1
}

// makeNestedMountpoints is volume/util.MakeNestedMountpoints: in a
// read-only volume, the directories where the pod's containers mount other
// volumes inside it, which the runtime could not make later.
func makeNestedMountpoints(name, baseDir string, pod *corev1.Pod) error {
	dirs, err := nestedMountpoints(name, pod)
	if err != nil {
		return err
	}
	for _, dir := range dirs {
		if err := os.MkdirAll(filepath.Join(baseDir, dir), 0o755); err != nil {
			return fmt.Errorf("unable to create nested volume mountpoints: %v", err)
		}
	}
	return nil
}

// nestedMountpoints is getNestedMountpoints: for each container and each
// place it mounts the volume name, the mount points of other volumes right
// under it (not nested twice), relative to it.
func nestedMountpoints(name string, pod *corev1.Pod) ([]string, error) {
	var out []string
	check := func(mounts []corev1.VolumeMount) error {
		var all, mine []string
		for _, vm := range mounts {
			cleaned := filepath.Clean(vm.MountPath)
			all = append(all, cleaned)
			if vm.Name == name {
				mine = append(mine, cleaned)
			}
		}
		sort.Strings(all)
		for _, mp := range mine {
			if strings.HasPrefix(mp, "../") {
				return fmt.Errorf("invalid container mount point %v", mp)
			}
			withSlash := mp + "/"
			var prev []string
			for _, other := range all {
				if !strings.HasPrefix(other, withSlash) {
					continue
				}
				if slices.ContainsFunc(prev, func(p string) bool { return strings.HasPrefix(other, p) }) {
					continue
				}
				prev = append(prev, other+"/")
				out = append(out, other[len(withSlash):])
			}
		}
		return nil
	}
	for _, c := range pod.Spec.InitContainers {
		if err := check(c.VolumeMounts); err != nil {
			return nil, err
		}
	}
	for _, c := range pod.Spec.Containers {
		if err := check(c.VolumeMounts); err != nil {
			return nil, err
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if err := check(c.VolumeMounts); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// volumeKind names a volume's source as the API's field does.
func volumeKind(v *corev1.Volume) string {
	s := v.VolumeSource
	switch {
	case s.ConfigMap != nil:
		return "configMap"
	case s.Secret != nil:
		return "secret"
	case s.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case s.Ephemeral != nil:
		return "ephemeral"
	case s.CSI != nil:
		return "csi"
	case s.NFS != nil:
		return "nfs"
	case s.ISCSI != nil:
		return "iscsi"
	case s.FC != nil:
		return "fc"
	case s.GitRepo != nil:
		return "gitRepo"
	case s.Glusterfs != nil:
		return "glusterfs"
	case s.RBD != nil:
		return "rbd"
	case s.CephFS != nil:
		return "cephfs"
	case s.FlexVolume != nil:
		return "flexVolume"
	case s.Cinder != nil:
		return "cinder"
	case s.AzureFile != nil:
		return "azureFile"
	case s.AzureDisk != nil:
		return "azureDisk"
	case s.GCEPersistentDisk != nil:
		return "gcePersistentDisk"
	case s.AWSElasticBlockStore != nil:
		return "awsElasticBlockStore"
	case s.VsphereVolume != nil:
		return "vsphereVolume"
	case s.Quobyte != nil:
		return "quobyte"
	case s.PhotonPersistentDisk != nil:
		return "photonPersistentDisk"
	case s.PortworxVolume != nil:
		return "portworxVolume"
	case s.ScaleIO != nil:
		return "scaleIO"
	case s.StorageOS != nil:
		return "storageos"
	case s.Flocker != nil:
		return "flocker"
	}
	return "sourceless"
}
