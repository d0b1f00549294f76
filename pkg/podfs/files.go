package podfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

// PrepareContainer makes on the host what a start of in.Container needs,
// as kubelet's GenerateRunContainerOptions and kuberuntime's makeMounts do
// before each start, and returns in completed for podconfig.Container:
//
//   - ReadEnvFile, so that fileKeyRef variables read their env files
//     (ReadEnvFile);
//   - SubPaths: each subPath and subPathExpr of its volumeMounts
//     (podconfig's SubPathMounts) made a directory when missing and
//     bind-mounted onto Layout.SubPathBindTarget, the path handed to the
//     runtime (subpather's SafeMakeDir and PrepareSafeSubpath): crictl
//     inspect shows kubelet's paths;
//   - the pod's etc-hosts file written when the container mounts it
//     (ensureHostsFile: the managed file of the pod's IPs, hostname and
//     aliases on the pod network, the node's hosts file and the aliases on
//     the host network);
//   - TerminationMessageHostPath: a new empty file, mode 0666, under
//     Layout.ContainerDir, when the container has a terminationMessagePath
//     ("" when it could not be made: kubelet then starts the container
//     without it and logs the error).
//
// in holds the pod and container as podconfig gets them, the sandbox's
// PodIP and PodIPs, and the pod's Volumes (SetUp's, with the image
// volumes); its RestartCount and Image are not read. A failure kubelet
// reports as CreateContainerConfigError is a *podconfig.ConfigError with
// kubelet's message; a subPath's wraps the *SubPathError that says what
// happened on the host. The pod directory must have the agent's record.
func (m *Manager) PrepareContainer(ctx context.Context, in podconfig.ContainerInput) (podconfig.ContainerInput, error) {
	if in.Pod == nil || in.Container == nil {
		return in, errors.New("podfs: PrepareContainer without a pod or a container")
	}
	pod, c := in.Pod, in.Container
	uid := string(pod.UID)
	if err := checkElem("pod UID", uid); err != nil {
		return in, err
	}
	if err := checkElem("container name", c.Name); err != nil {
		return in, err
	}
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "podUID", uid, "containerName", c.Name)
	defer m.lockPod(uid)()
	dfd, err := m.openRecordedPodDir(uid)
	if err != nil {
		return in, err
	}
	defer unix.Close(dfd)

	in.ReadEnvFile = ReadEnvFile
	in.SubPaths = nil
	in.TerminationMessageHostPath = ""
	// The subPaths kubelet prepares before it fails are prepared here too,
	// and their failure comes first, as in kubelet's makeMounts.
	sps, checkErr := podconfig.SubPathMounts(in, m.node)
	for _, sp := range sps {
		if err := checkElem("volume name", sp.Volume); err != nil {
			return in, err
		}
		target, err := m.bindSubPath(ctx, pod.UID, c.Name, sp)
		if err != nil {
			var se *SubPathError
			if !errors.As(err, &se) {
				se = &SubPathError{Err: err}
			}
			// Kubelet logs the detail and tells the pod's owner less.
			logger.Error(se, "Failed to prepare subPath for volumeMount of the container", "volumeMountName", sp.Volume)
			return in, &podconfig.ConfigError{Message: se.Message(sp.Volume, c.Name), Err: se}
		}
		if in.SubPaths == nil {
			in.SubPaths = map[int]string{}
		}
		in.SubPaths[sp.Index] = target
	}
	if checkErr != nil {
		return in, checkErr
	}

	if podconfig.MountsHostsFile(pod, c, in.PodIPs) {
		if err := m.ensureHostsFile(dfd, pod, in.PodIPs); err != nil {
			// Kubelet returns ensureHostsFile's error as it is.
			return in, &podconfig.ConfigError{Message: err.Error(), Err: err}
		}
	}

	if c.TerminationMessagePath != "" {
		path, err := m.terminationMessageFile(dfd, pod.UID, c.Name)
		if err != nil {
			logger.Error(err, "Error on creating termination-log file")
		}
		in.TerminationMessageHostPath = path
	}
	return in, nil
}

// MakeLogsDir makes the pod's log directory, Layout.PodLogsDirectory
// (<podLogsDir>/<namespace>_<name>_<uid>, the sandbox config's
// LogDirectory), 0755 under the umask, and returns its path: kubelet's
// createPodSandbox does so before each RunPodSandbox, and fails the
// sandbox when it cannot ("Failed to create log directory for pod ...").
// RemoveLogs removes it.
func (m *Manager) MakeLogsDir(namespace, name, uid string) (string, error) {
	for _, e := range [][2]string{{"namespace", namespace}, {"pod name", name}, {"pod UID", uid}} {
		if err := checkElem(e[0], e[1]); err != nil {
			return "", err
		}
	}
	dir := m.layout.PodLogsDirectory(namespace, name, types.UID(uid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// ensureHostsFile is kubelet's makeHostsMount and ensureHostsFile: the
// pod's etc-hosts file, the node's hosts file under kubelet's header with
// the pod's aliases on the host network, else the managed file of
// podconfig's HostsFile. Kubelet rewrites it at every start of a container
// that mounts it.
func (m *Manager) ensureHostsFile(dfd int, pod *corev1.Pod, podIPs []string) error {
	var content []byte
	if pod.Spec.HostNetwork {
		nodeHosts, err := os.ReadFile(m.hostsFile)
		if err != nil {
			return err
		}
		content = podconfig.HostNetworkHostsFile(nodeHosts, pod.Spec.HostAliases)
	} else {
		hostname, domain, err := podconfig.HostnameAndDomain(pod, m.node)
		if err != nil {
			return err
		}
		content = podconfig.HostsFile(podIPs, hostname, domain, pod.Spec.HostAliases)
	}
	return m.writeHosts(dfd, pod.UID, content)
}

// writeHosts writes content as the pod's hosts file, Layout.EtcHosts, in
// the open pod directory dfd, mode 0644 (ensureHostsFile's os.WriteFile
// and os.Chmod). The file is rewritten in place, not replaced, as
// os.WriteFile does: running containers have it bind-mounted, which holds
// its inode, and see the new content as under kubelet. It is never written
// through a link.
func (m *Manager) writeHosts(dfd int, uid types.UID, content []byte) error {
	path := m.layout.EtcHosts(uid)
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(dfd, relElem(path), unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o644)
	})
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	// Written from the start, then cut to its length: a reader sees old
	// or new lines, never an empty file.
	if _, err := f.WriteAt(content, 0); err != nil {
		return err
	}
	if err := f.Truncate(int64(len(content))); err != nil {
		return err
	}
	// 0644 whatever the umask (ensureHostsFile's os.Chmod).
	return f.Chmod(0o644)
}

// terminationMessageFile creates, in the open pod directory dfd, the empty
// file, mode 0666, that a start of container mounts at its
// terminationMessagePath, and returns its path:
// <pod>/containers/<container>/<8 hex digits>, a new one for each start
// (kuberuntime's makeMounts with makeUID; the directory 0750 as
// GenerateRunContainerOptions makes it). The files stay until the pod
// directory is removed, as under kubelet.
func (m *Manager) terminationMessageFile(dfd int, uid types.UID, container string) (string, error) {
	dir := m.layout.ContainerDir(uid, container)
	containers := filepath.Dir(dir)
	cfd, err := mkdirOpenAt(dfd, relElem(containers), containers)
	if err != nil {
		return "", err
	}
	defer unix.Close(cfd)
	nfd, err := mkdirOpenAt(cfd, relElem(dir), dir)
	if err != nil {
		return "", err
	}
	defer unix.Close(nfd)
	for range 100 {
		name := fmt.Sprintf("%08x", rand.Uint32()) // makeUID
		fd, err := openRetry(func() (int, error) {
			return unix.Openat(nfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
		})
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		path := dir + "/" + name
		if err != nil {
			return "", &fs.PathError{Op: "create", Path: path, Err: err}
		}
		// 0666 whatever the umask: the container's user writes it.
		err = unix.Fchmod(fd, 0o666)
		unix.Close(fd)
		if err != nil {
			return "", &fs.PathError{Op: "chmod", Path: path, Err: err}
		}
		return path, nil
	}
	return "", fmt.Errorf("creating a termination message file in %s: no free name", dir)
}

// envFileMaxBytes bounds an env file ReadEnvFile reads. Kubelet reads any
// size; a container writing into its volume could make the agent hold a
// file of any size, so one over this fails as an unreadable file does.
const envFileMaxBytes = 16 << 20

// ReadEnvFile reads the env file of a fileKeyRef, at path inside the
// volume whose host path is volumeDir, as kubelet's
// makeEnvironmentVariables finds it (securejoin.SecureJoin: links are
// resolved as if volumeDir were the root, so that none leads out of the
// volume), for podconfig.ContainerInput.ReadEnvFile. Unlike SecureJoin's
// path, which the open then follows again, the file is opened by that
// resolution (openat2's RESOLVE_IN_ROOT): a link a container swaps in
// meanwhile cannot lead out either. It never opens anything but a regular
// file (a FIFO a container made there cannot hang the agent) and refuses
// one over 16 MiB.
func ReadEnvFile(volumeDir, path string) ([]byte, error) {
	return readEnvFile(volumeDir, path, openInRoot)
}

// readEnvFile is ReadEnvFile opening with open (openInRoot, or in tests
// its fallback).
func readEnvFile(volumeDir, path string, open func(root int, path string, flags int) (int, error)) ([]byte, error) {
	root, err := openRetry(func() (int, error) {
		return unix.Open(volumeDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: volumeDir, Err: err}
	}
	defer unix.Close(root)
	full := filepath.Join(volumeDir, path)
	fd, err := open(root, path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: full, Err: err}
	}
	f := os.NewFile(uintptr(fd), full)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", full, fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, envFileMaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > envFileMaxBytes {
		return nil, fmt.Errorf("%s is over %d bytes", full, envFileMaxBytes)
	}
	return data, nil
}

// openInRoot opens path under the directory root with flags, its links
// resolved as if root were "/" and ".." stopping there: openat2 with
// RESOLVE_IN_ROOT (Linux 5.6), else the same walk by hand, one component
// at a time, never following a link the kernel would.
func openInRoot(root int, path string, flags int) (int, error) {
	fd, err := openRetry(func() (int, error) {
		return unix.Openat2(root, path, &unix.OpenHow{
			Flags:   uint64(flags),
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
		})
	})
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
		return fd, err
	}
	return walkInRoot(root, path, flags)
}

// maxLinks is the kernel's limit on links followed in one resolution
// (MAXSYMLINKS).
const maxLinks = 40

// walkInRoot is openInRoot without openat2, securejoin's walk on
// descriptors: each component opened with O_PATH|O_NOFOLLOW from its
// parent, a link's target walked in its place (from root when absolute),
// ".." popping back to the parent and never above root.
func walkInRoot(root int, path string, flags int) (int, error) {
	base, err := unix.FcntlInt(uintptr(root), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	stack := []int{base} // the directories from root to the current one
	defer func() {
		for _, fd := range stack {
			unix.Close(fd)
		}
	}()
	rest := strings.Split(path, "/")
	links := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		cur := stack[len(stack)-1]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(stack) > 1 {
				unix.Close(cur)
				stack = stack[:len(stack)-1]
			}
			continue
		}
		child, err := openRetry(func() (int, error) {
			return unix.Openat(cur, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		})
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(child, &st); err != nil {
			unix.Close(child)
			return -1, err
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(child, "", buf)
			unix.Close(child)
			if err != nil {
				return -1, err
			}
			if links++; links > maxLinks {
				return -1, unix.ELOOP
			}
			target := string(buf[:n])
			if strings.HasPrefix(target, "/") {
				for _, fd := range stack[1:] {
					unix.Close(fd)
				}
				stack = stack[:1]
			}
			rest = append(strings.Split(target, "/"), rest...)
		case len(rest) == 0 || allEmpty(rest):
			// The file itself: opened for real from its parent, refusing a
			// link swapped in since.
			unix.Close(child)
			return openRetry(func() (int, error) {
				return unix.Openat(cur, name, flags|unix.O_NOFOLLOW, 0)
			})
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			unix.Close(child)
			return -1, unix.ENOTDIR
		default:
			stack = append(stack, child)
		}
	}
	// The path named root or a directory: open it as asked.
	return openRetry(func() (int, error) {
		return unix.Openat(stack[len(stack)-1], ".", flags, 0)
	})
}

// allEmpty reports whether the components left are all "" or ".": a
// trailing slash.
func allEmpty(parts []string) bool {
	for _, p := range parts {
		if p != "" && p != "." {
			return false
		}
	}
	return true
}

// openOwnedPodDir opens the pod directory of uid, which must carry the
// agent's record.
func (m *Manager) openRecordedPodDir(uid string) (int, error) {
	pods, err := m.openPods()
	if err != nil {
		return -1, err
	}
	defer pods.Close()
	dfd, err := openDirAt(int(pods.Fd()), uid)
	if err != nil {
		return -1, m.podDirError(uid, err)
	}
	if _, err := readRecordAt(dfd, m.layout.RecordFile(types.UID(uid)), uid); err != nil {
		unix.Close(dfd)
		return -1, err
	}
	return dfd, nil
}

// mkdirOpenAt makes the directory name (0750) in dirfd when missing and
// opens it, never through a link; path is its path, for errors.
func mkdirOpenAt(dirfd int, name, path string) (int, error) {
	if err := unix.Mkdirat(dirfd, name, 0o750); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, &fs.PathError{Op: "mkdir", Path: path, Err: err}
	}
	fd, err := openDirAt(dirfd, name)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}
