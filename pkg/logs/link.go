package logs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

// ext4MaxFileNameLen bounds a link's name, as kubelet's logSymlink.
const ext4MaxFileNameLen = 255

// LinkName is the name of a container's link in the link directory,
// kubelet's logSymlink: <pod>_<namespace>_<container>-<id>.log, cut to
// 255 bytes. The names come from the runtime, where any CRI client may
// have put them: one that is empty, ".", "..", or holds a "/" or a NUL is
// refused (kubelet checks none, trusting the API server's validation),
// so that the name stays one entry of the link directory ending .log,
// cut or not.
func LinkName(namespace, podName, container, id string) (string, error) {
	for _, c := range [...][2]string{{"namespace", namespace}, {"pod name", podName}, {"container name", container}, {"container ID", id}} {
		if !validComponent(c[1]) {
			return "", fmt.Errorf("the %s %q cannot be part of a file name: no link for it", c[0], c[1])
		}
	}
	const suffix = ".log"
	name := fmt.Sprintf("%s_%s_%s-%s", podName, namespace, container, id)
	if len(name) > ext4MaxFileNameLen-len(suffix) {
		name = name[:ext4MaxFileNameLen-len(suffix)]
	}
	return name + suffix, nil
}

// Links makes and removes the node's links to the log files of the
// containers the agent starts (kubelet's legacyLogSymlink in
// /var/log/containers, for the log shippers), and removes an instance's
// log files with it (kubelet's removeContainerLog): restart.ContainerLogs.
// No link on the way is followed: a link planted where a link is to be is
// replaced, one planted among a log's files is removed, not its target.
// Only a log file under Root is linked or removed: the runtime reports the
// path any client gave, and /etc/shadow is not a log.
type Links struct {
	// Dir is the link directory ("": no links made or removed).
	Dir string
	// Root is the pod logs directory (--pod-logs-dir): the log files
	// removed, and those linked, lie under it ("": none).
	Root string
	// KeepFiles leaves the log files at a removal, the link alone going:
	// kubelet's stub log manager, with a negative containerLogMaxSize.
	KeepFiles bool
}

// Link links the instance's log file from the link directory, once it
// exists (kubelet links only then: a runtime logging elsewhere would leave
// a dangling link).
func (l Links) Link(namespace, podName string, inst *cri.Container) error {
	if l.Dir == "" || inst.LogPath == "" {
		return nil
	}
	name, err := LinkName(namespace, podName, inst.Name, inst.ID)
	if err != nil {
		return err
	}
	if exists, err := logExists(l.Root, inst.LogPath); err != nil || !exists {
		return err
	}
	d, err := openDir(l.Dir, linkDirOwn)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(l.Dir, 0o755); err != nil {
			return fmt.Errorf("create the log link directory: %w", err)
		}
		d, err = openDir(l.Dir, linkDirOwn)
	}
	if err != nil {
		return fmt.Errorf("open the log link directory: %w", err)
	}
	defer d.Close()
	if err := d.symlink(inst.LogPath, name); err != nil {
		return fmt.Errorf("failed to create legacy symbolic link %q to the container log %q: %w", d.name(name), inst.LogPath, err)
	}
	return nil
}

// logExists says whether the log file at path exists, a regular file
// under root reached through no link.
func logExists(root, path string) (bool, error) {
	d, base, err := openLogBeneath(root, path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("no link to the container log: %w", err)
	}
	defer d.Close()
	_, mode, err := d.stat(base)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case !mode.IsRegular():
		return false, fmt.Errorf("no link to the container log %s: not a regular file", path)
	}
	return true, nil
}

// Remove removes the instance's log file, its rotated files (<log>.*,
// kubelet's logManager.Clean) and its link. What is not a regular file or
// a link (a directory) is left; so is a log file not under Root, and a
// link whose name the instance's names cannot make.
func (l Links) Remove(namespace, podName string, inst *cri.Container) error {
	var errs []error
	if inst.LogPath != "" && !l.KeepFiles {
		errs = append(errs, removeLogFiles(l.Root, inst.LogPath))
	}
	if l.Dir != "" {
		name, err := LinkName(namespace, podName, inst.Name, inst.ID)
		if err == nil {
			err = removeLink(l.Dir, name)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeLogFiles removes the log file at path and its rotated files,
// reading the directory in batches, however many a container planted.
func removeLogFiles(root, path string) error {
	d, base, err := openLogBeneath(root, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove the logs of %s: %w", path, err)
	}
	defer d.Close()
	var errs []error
	err = d.each(func(n string) bool {
		if n != base && !isRotated(base, n) {
			return true // another log's (base 1.log: not 1.log-other)
		}
		if _, mode, err := d.stat(n); err != nil || !mode.IsRegular() && mode.Type() != fs.ModeSymlink {
			return true
		}
		if err := d.remove(n); err != nil {
			errs = append(errs, fmt.Errorf("failed to remove container log %q: %w", d.name(n), err))
		}
		return len(errs) < 8
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("remove the logs of %s: %w", path, err))
	}
	return errors.Join(errs...)
}

// isRotated says whether name is a file of log's rotation: kubelet's
// Clean removes <log>*, which for 1.log would also match 1.logx; the
// runtime's other files never start so, but a rotation's all start
// <log>. .
func isRotated(log, name string) bool {
	return len(name) > len(log) && name[:len(log)] == log && name[len(log)] == '.'
}

func removeLink(dir, name string) error {
	d, err := openDir(dir, linkDirOwn)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open the log link directory: %w", err)
	}
	defer d.Close()
	if _, mode, err := d.stat(name); err != nil || mode.IsDir() {
		return nil // gone, or not ours
	}
	if err := d.remove(name); err != nil {
		return fmt.Errorf("failed to remove container log legacy symbolic link %q: %w", d.name(name), err)
	}
	return nil
}

// PruneDangling removes the links of the link directory that point to a
// log file under Root that no longer exists (kubelet's container GC
// removes every dangling link whose container it does not know): an
// instance another client removed, or removed while the agent was down,
// leaves its link otherwise for good. A link pointing elsewhere is
// another's (a kubelet's sharing the directory) and stays. It reads at
// most maxScanned entries and returns how many links it removed.
func (l Links) PruneDangling() (int, error) {
	if l.Dir == "" || l.Root == "" {
		return 0, nil
	}
	d, err := openDir(l.Dir, linkDirOwn)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("open the log link directory: %w", err)
	}
	defer d.Close()
	var dangling []string
	scanned := 0
	buf := make([]byte, unix.PathMax)
	err = d.each(func(name string) bool {
		if scanned++; scanned > maxScanned {
			return false
		}
		if !strings.HasSuffix(name, ".log") {
			return true
		}
		n, err := unix.Readlinkat(d.fd, name, buf)
		if err != nil || n >= len(buf) {
			return true // not a link, or not one of ours
		}
		target := string(buf[:n])
		if _, err := beneath(l.Root, filepath.Dir(target)); err != nil {
			return true
		}
		if exists, err := logExists(l.Root, target); err == nil && !exists {
			dangling = append(dangling, name)
		}
		return true
	})
	removed := 0
	for _, name := range dangling {
		if rerr := d.remove(name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
			continue
		}
		removed++
	}
	return removed, err
}
