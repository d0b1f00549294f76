package podfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// The first lines of kubelet's hosts files (kubelet_pods.go).
const (
	managedHostsHeader                = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderWithHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
)

// WriteHosts writes content as the pod's hosts file, <pod>/etc-hosts, mode
// 0644, and returns its path (kubelet's ensureHostsFile, called at each
// container start; makeHostsMount mounts it at /etc/hosts, read-write,
// relabelled). The file is rewritten in place, not replaced: running
// containers have it bind-mounted, which holds its inode, and see the new
// content as under kubelet. It is never written through a link.
func (m *Manager) WriteHosts(uid string, content []byte) (string, error) {
	if err := checkElem("pod UID", uid); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	path := m.layout.EtcHosts(uid)
	dfd, err := m.openOwnedPodDir(uid)
	if err != nil {
		return "", err
	}
	defer unix.Close(dfd)
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(dfd, etcHostsFileName, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o644)
	})
	if err != nil {
		return "", &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	// Written from the start, then cut to its length: a reader sees old
	// or new lines, never an empty file.
	if _, err := f.WriteAt(content, 0); err != nil {
		return "", err
	}
	if err := f.Truncate(int64(len(content))); err != nil {
		return "", err
	}
	// 0644 whatever the umask (ensureHostsFile's os.Chmod).
	if err := f.Chmod(0o644); err != nil {
		return "", err
	}
	return path, nil
}

// NodeHosts returns the hosts file of a pod on the host's network, made
// from the node's hosts file at path (/etc/hosts) and the pod's
// hostAliases, as kubelet's nodeHostsFileContent: a header, the node's
// file, then the aliases.
func NodeHosts(path string, aliases ...corev1.HostAlias) ([]byte, error) {
	content, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(managedHostsHeaderWithHostNetwork)
	b.Write(content)
	b.Write(hostsEntriesFromHostAliases(aliases))
	return b.Bytes(), nil
}

// ManagedHosts returns the hosts file of a pod on its own network, as
// kubelet's managedHostsFileContent: localhost entries, the pod's IPs with
// its hostname (and hostname.domain when there is a domain), then the
// aliases. Pure: it may move to the pod config package.
func ManagedHosts(podIPs []string, hostName, hostDomainName string, aliases []corev1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if hostDomainName != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostName, hostDomainName, hostName)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostName)
		}
	}
	b.Write(hostsEntriesFromHostAliases(aliases))
	return b.Bytes()
}

func hostsEntriesFromHostAliases(aliases []corev1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}

// TerminationMessageFile creates the empty file, mode 0666, that a start
// of container mounts at its terminationMessagePath, and returns its
// path: <pod>/containers/<container>/<8 hex digits>, a new one for each
// start (kuberuntime's makeMounts with makeUID; the directory 0750 as
// GenerateRunContainerOptions makes it). The files stay until the pod
// directory is removed, as under kubelet.
func (m *Manager) TerminationMessageFile(uid, container string) (string, error) {
	if err := checkElem("pod UID", uid); err != nil {
		return "", err
	}
	if err := checkElem("container name", container); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dfd, err := m.openOwnedPodDir(uid)
	if err != nil {
		return "", err
	}
	defer unix.Close(dfd)
	cfd, err := mkdirOpenAt(dfd, containersDirName, m.layout.PodDir(uid)+"/"+containersDirName)
	if err != nil {
		return "", err
	}
	defer unix.Close(cfd)
	dir := m.layout.ContainerDir(uid, container)
	nfd, err := mkdirOpenAt(cfd, container, dir)
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

// openOwnedPodDir opens the pod directory of uid, which must carry the
// agent's record.
func (m *Manager) openOwnedPodDir(uid string) (int, error) {
	pods, err := m.openPods()
	if err != nil {
		return -1, err
	}
	defer pods.Close()
	dfd, err := openDirAt(int(pods.Fd()), uid)
	if err != nil {
		return -1, m.podDirError(uid, err)
	}
	if _, err := readOwnerAt(dfd, m.layout.OwnerFile(uid), uid); err != nil {
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
