package logs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

// ext4MaxFileNameLen bounds a link's name, as kubelet's logSymlink.
const ext4MaxFileNameLen = 255

// LinkName is the name of a container's link in the link directory,
// kubelet's logSymlink: <pod>_<namespace>_<container>-<id>.log, cut to
// 255 bytes.
func LinkName(namespace, podName, container, id string) string {
	const suffix = ".log"
	name := fmt.Sprintf("%s_%s_%s-%s", podName, namespace, container, id)
	if len(name) > ext4MaxFileNameLen-len(suffix) {
		name = name[:ext4MaxFileNameLen-len(suffix)]
	}
	return name + suffix
}

// Links makes and removes the node's links to the log files of the
// containers the agent starts (kubelet's legacyLogSymlink in
// /var/log/containers, for the log shippers), and removes an instance's
// log files with it (kubelet's removeContainerLog): restart.ContainerLogs.
// No link on the way is followed: a link planted where a link is to be is
// replaced, one planted among a log's files is removed, not its target.
type Links struct {
	// Dir is the link directory ("": no links made or removed).
	Dir string
}

// Link links the instance's log file from the link directory, once it
// exists (kubelet links only then: a runtime logging elsewhere would leave
// a dangling link).
func (l Links) Link(namespace, podName string, inst *cri.Container) error {
	if l.Dir == "" || inst.LogPath == "" {
		return nil
	}
	if _, err := os.Lstat(inst.LogPath); errors.Is(err, fs.ErrNotExist) {
		return nil
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
	name := LinkName(namespace, podName, inst.Name, inst.ID)
	if err := d.symlink(inst.LogPath, name); err != nil {
		return fmt.Errorf("failed to create legacy symbolic link %q to the container log %q: %w", d.name(name), inst.LogPath, err)
	}
	return nil
}

// Remove removes the instance's log file, its rotated files (<log>.*,
// kubelet's logManager.Clean) and its link. What is not a regular file or
// a link (a directory) is left.
func (l Links) Remove(namespace, podName string, inst *cri.Container) error {
	var errs []error
	if inst.LogPath != "" {
		errs = append(errs, removeLogFiles(inst.LogPath))
	}
	if l.Dir != "" {
		errs = append(errs, removeLink(l.Dir, LinkName(namespace, podName, inst.Name, inst.ID)))
	}
	return errors.Join(errs...)
}

func removeLogFiles(path string) error {
	dir, base := filepath.Split(path)
	d, err := openDir(dir, logDirOwn)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove the logs of %s: %w", path, err)
	}
	defer d.Close()
	files, others, err := d.list(base)
	if err != nil {
		return fmt.Errorf("remove the logs of %s: %w", path, err)
	}
	names := names(files)
	for _, o := range others {
		if _, mode, err := d.stat(o); err == nil && mode.Type() == fs.ModeSymlink {
			names = append(names, o)
		}
	}
	for _, n := range names {
		if n != base && !isRotated(base, n) {
			continue // another log's (base 1.log: not 1.log-other)
		}
		if err := d.remove(n); err != nil {
			return fmt.Errorf("failed to remove container log %q: %w", d.name(n), err)
		}
	}
	return nil
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
