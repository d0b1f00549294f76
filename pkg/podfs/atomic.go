package podfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The atomic writer's reserved names (volume/util.AtomicWriter).
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	tsDirLayout    = "..2006_01_02_15_04_05."
)

const (
	maxFileNameLength = 255
	maxPathLength     = 4096
)

// fileProjection is one file of a volume's payload (volumeutil.FileProjection).
type fileProjection struct {
	data []byte
	mode int32
}

// atomicWriter projects a payload of files into a directory the way
// kubelet's volume/util.AtomicWriter does, so that containers and tools see
// the same thing as under kubelet:
//
//	<dir>/..2016_02_01_15_04_05.123456789/<files>   the data, a new directory per change
//	<dir>/..data -> ..2016_02_01_15_04_05.123456789  switched by one rename
//	<dir>/<first element of each path> -> ..data/<first element>
//
// A reader following ..data sees the old set of files or the new one,
// never a mix; inotify users watch ..data. Unlike kubelet's, it removes
// what a write cut short (by a crash) left behind: a stale ..data_tmp, on
// which kubelet's next symlink would fail, and timestamped directories
// that ..data does not point to.
type atomicWriter struct {
	dir string
	now func() time.Time
}

// write follows AtomicWriter.Write's steps; setPerms, when not nil, is
// called with the new timestamped directory's name before it is published.
func (w atomicWriter) write(payload map[string]fileProjection, setPerms func(tsDir string) error) error {
	// (1) validate
	clean := make(map[string]fileProjection, len(payload))
	for p, fp := range payload {
		if err := validatePayloadPath(p); err != nil {
			return err
		}
		clean[filepath.Clean(p)] = fp
	}

	// (2) the current timestamped directory
	dataDirPath := filepath.Join(w.dir, dataDirName)
	oldTsDir, err := os.Readlink(dataDirPath)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		oldTsDir = ""
	}
	if err := w.removeLeftovers(oldTsDir); err != nil {
		return err
	}
	oldTsPath := filepath.Join(w.dir, oldTsDir)

	var toRemove map[string]bool
	shouldWrite := true
	if oldTsDir != "" {
		// (3) user-visible paths that the new payload drops
		if toRemove, err = pathsToRemove(clean, oldTsPath); err != nil {
			return err
		}
		// (4) whether the data changed (kubelet compares data, not modes)
		should, err := shouldWritePayload(clean, oldTsPath)
		if err != nil {
			return err
		}
		if !should && len(toRemove) == 0 {
			// Up to date; the visible links are still made below
			// (kubernetes#121472), and the data directory kept.
			shouldWrite = false
			oldTsDir = ""
		}
	}

	if shouldWrite {
		// (5) a new timestamped directory, 0755 whatever the umask
		tsDir, err := os.MkdirTemp(w.dir, w.now().UTC().Format(tsDirLayout))
		if err != nil {
			return err
		}
		if err := os.Chmod(tsDir, 0o755); err != nil {
			return err
		}
		tsDirName := filepath.Base(tsDir)
		// (6) the payload
		if err := writePayloadToDir(clean, tsDir); err != nil {
			return err
		}
		// (7) ownership (fsGroup)
		if setPerms != nil {
			if err := setPerms(tsDirName); err != nil {
				return err
			}
		}
		// (8) ..data_tmp -> the new directory, (9) renamed over ..data
		newDataDirPath := filepath.Join(w.dir, newDataDirName)
		if err := os.Symlink(tsDirName, newDataDirPath); err != nil {
			_ = os.RemoveAll(tsDir)
			return err
		}
		if err := os.Rename(newDataDirPath, dataDirPath); err != nil {
			_ = os.Remove(newDataDirPath)
			_ = os.RemoveAll(tsDir)
			return err
		}
	}

	// (10) the user-visible links
	if err := w.createUserVisibleFiles(clean); err != nil {
		return err
	}
	// (11) the links of paths no longer in the payload
	if err := w.removeUserVisiblePaths(toRemove); err != nil {
		return err
	}
	// (12) the previous data
	if oldTsDir != "" {
		if err := os.RemoveAll(oldTsPath); err != nil {
			return err
		}
	}
	return nil
}

// removeLeftovers removes what a cut-short write left: ..data_tmp, and
// timestamped directories other than current.
func (w atomicWriter) removeLeftovers(current string) error {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == newDataDirName:
			if err := os.Remove(filepath.Join(w.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		case name != current && isTsDirName(name) && e.IsDir():
			if err := os.RemoveAll(filepath.Join(w.dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// isTsDirName reports whether name is a timestamped directory's name:
// "..YYYY_MM_DD_hh_mm_ss.<random>".
func isTsDirName(name string) bool {
	prefix := len(tsDirLayout) // "..2006_01_02_15_04_05."
	if len(name) <= prefix || !strings.HasPrefix(name, "..") || name[prefix-1] != '.' {
		return false
	}
	_, err := time.Parse(tsDirLayout, name[:prefix])
	return err == nil
}

// validatePayloadPath is AtomicWriter's validatePath, with its texts.
func validatePayloadPath(targetPath string) error {
	if targetPath == "" {
		return fmt.Errorf("invalid path: must not be empty: %q", targetPath)
	}
	if path.IsAbs(targetPath) {
		return fmt.Errorf("invalid path: must be relative path: %s", targetPath)
	}
	if len(targetPath) > maxPathLength {
		return fmt.Errorf("invalid path: must be less than or equal to %d characters", maxPathLength)
	}
	items := strings.Split(targetPath, "/")
	for _, item := range items {
		if item == ".." {
			return fmt.Errorf("invalid path: must not contain '..': %s", targetPath)
		}
		if len(item) > maxFileNameLength {
			return fmt.Errorf("invalid path: filenames must be less than or equal to %d characters", maxFileNameLength)
		}
	}
	if strings.HasPrefix(items[0], "..") && len(items[0]) > 2 {
		return fmt.Errorf("invalid path: must not start with '..': %s", targetPath)
	}
	return nil
}

func shouldWritePayload(payload map[string]fileProjection, oldTsDir string) (bool, error) {
	for p, fp := range payload {
		full := filepath.Join(oldTsDir, p)
		if _, err := os.Lstat(full); errors.Is(err, fs.ErrNotExist) {
			return true, nil
		}
		onDisk, err := os.ReadFile(full)
		if err != nil {
			return false, err
		}
		if !bytes.Equal(fp.data, onDisk) {
			return true, nil
		}
	}
	return false, nil
}

// pathsToRemove returns the paths of the old data directory that no path
// of the payload, nor a parent of one, has.
func pathsToRemove(payload map[string]fileProjection, oldTsDir string) (map[string]bool, error) {
	paths := map[string]bool{}
	err := filepath.Walk(oldTsDir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, oldTsDir), "/")
		if rel != "" {
			paths[rel] = true
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for file := range payload {
		for sub := file; sub != "" && sub != "."; sub = filepath.Dir(sub) {
			delete(paths, sub)
		}
	}
	return paths, nil
}

func writePayloadToDir(payload map[string]fileProjection, dir string) error {
	for p, fp := range payload {
		mode := os.FileMode(fp.mode)
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), os.ModePerm); err != nil {
			return err
		}
		if err := os.WriteFile(full, fp.data, mode); err != nil {
			return err
		}
		// WriteFile's mode is masked by the umask; the item's is wanted.
		if err := os.Chmod(full, mode); err != nil {
			return err
		}
	}
	return nil
}

// createUserVisibleFiles links the first element of each path to
// ..data/<element>, where no link is yet.
func (w atomicWriter) createUserVisibleFiles(payload map[string]fileProjection) error {
	names := make([]string, 0, len(payload))
	for p := range payload {
		first, _, _ := strings.Cut(p, "/")
		names = append(names, first)
	}
	sort.Strings(names)
	for _, name := range names {
		visible := filepath.Join(w.dir, name)
		if _, err := os.Readlink(visible); err != nil && errors.Is(err, fs.ErrNotExist) {
			if err := os.Symlink(filepath.Join(dataDirName, name), visible); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeUserVisiblePaths removes the links, in the volume's top directory
// only, of paths gone from the payload.
func (w atomicWriter) removeUserVisiblePaths(paths map[string]bool) error {
	var last error
	for p := range paths {
		if strings.Contains(p, "/") {
			continue
		}
		if err := os.Remove(filepath.Join(w.dir, p)); err != nil {
			last = err
		}
	}
	return last
}
