package podfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

// ErrNoRecord is wrapped by the errors about a pod directory that has no
// pod record of the agent's: one the agent did not make (a kubelet's pod
// on the same root directory), which it never changes or removes.
var ErrNoRecord = errors.New("not a pod directory of cri-prober's (no " + podconfig.RecordFileName + ")")

// Record is the agent's pod record: its record in a pod directory that the
// pod is one of its static pods, kept in <pod dir>/cri-prober.json (podconfig.Layout.RecordFile): what the
// agent needs after a restart to know the pods it had made, to find each
// one's manifest again and to tear down one whose manifest is gone (its
// log directory is named by namespace, name and UID).
type Record struct {
	// Namespace, Name and UID are the pod's as it runs (a static pod's
	// name has the node name suffix): its sandbox's metadata and its log
	// directory's name (RemoveLogs).
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Source is where the pod came from: a manifest's path, or
	// "play:<file>".
	Source string `json:"source"`
	// Created is when the agent first recorded the pod: a rewrite of the
	// record keeps it.
	Created time.Time `json:"created"`
}

// PodDir is a pod directory found under the root (Pods).
type PodDir struct {
	UID string
	// Record is the agent's pod record; nil when the directory has none
	// (not the agent's) or it could not be read (Err).
	Record *Record
	Err    error
}

const (
	recordMaxBytes = 64 << 10
	// newPodPrefix names the directory a new pod directory is made in
	// before it is renamed into place with its record, so that no pod
	// directory of the agent's ever exists without one. It starts with a
	// dot: no pod UID does.
	newPodPrefix = ".cri-prober-new-"
)

// WriteRecord writes rec as the pod record of the pod directory of
// rec.UID, creating the directory (0750, makePodDataDirs) when missing. Call
// it before SetUp, which refuses a directory without a record: a new pod
// directory appears with its record in one rename, so after a crash every
// directory of the agent's has one and every directory without one is
// someone else's. The record is replaced atomically (temporary file,
// fsync, rename, fsync of the directory). A zero rec.Created is now, or the
// existing record's.
func (m *Manager) WriteRecord(rec Record) error {
	if err := checkElem("pod UID", rec.UID); err != nil {
		return err
	}
	defer m.lockPod(rec.UID)()

	if rec.Created.IsZero() {
		if old, err := m.readRecord(rec.UID); err == nil && old.UID == rec.UID {
			rec.Created = old.Created
		} else {
			rec.Created = m.clock.Now()
		}
	}
	rec.Created = rec.Created.UTC().Round(0)
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')

	if err := os.MkdirAll(m.layout.PodsDir(), 0o750); err != nil {
		return fmt.Errorf("recording the owner of pod %s: %w", rec.UID, err)
	}
	pods, err := m.openPods()
	if err != nil {
		return fmt.Errorf("recording the owner of pod %s: %w", rec.UID, err)
	}
	defer pods.Close()
	pfd := int(pods.Fd())

	if err := m.recordIn(pfd, rec.UID, data); !errors.Is(err, fs.ErrNotExist) {
		if err != nil {
			return fmt.Errorf("recording the owner of pod %s: %w", rec.UID, err)
		}
		return nil
	}

	// A new pod directory: made aside with its record, then renamed in.
	tmp := newPodPrefix + rec.UID
	if err := removeAllAt(pfd, tmp, m.layout.PodsDir()); err != nil {
		return fmt.Errorf("recording the owner of pod %s: removing a leftover %s: %w", rec.UID, tmp, err)
	}
	if err := unix.Mkdirat(pfd, tmp, 0o750); err != nil {
		return fmt.Errorf("recording the owner of pod %s: %w", rec.UID, &fs.PathError{Op: "mkdir", Path: m.layout.PodDir(types.UID(tmp)), Err: err})
	}
	if err := m.recordIn(pfd, tmp, data); err != nil {
		return fmt.Errorf("recording the owner of pod %s: %w", rec.UID, err)
	}
	if err := unix.Renameat2(pfd, tmp, pfd, rec.UID, unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) { // made meanwhile by another agent? never by this one: m.mu
			_ = removeAllAt(pfd, tmp, m.layout.PodsDir())
			return fmt.Errorf("recording the owner of pod %s: %s appeared meanwhile", rec.UID, m.layout.PodDir(types.UID(rec.UID)))
		}
		return fmt.Errorf("recording the owner of pod %s: %w", rec.UID, err)
	}
	if err := fsyncRetry(pfd); err != nil {
		return fmt.Errorf("recording the owner of pod %s: syncing %s: %w", rec.UID, m.layout.PodsDir(), err)
	}
	return nil
}

// recordIn writes the record into the directory name of the pods
// directory; an error matching fs.ErrNotExist when there is none.
func (m *Manager) recordIn(pfd int, name string, data []byte) error {
	dfd, err := openDirAt(pfd, name)
	if err != nil {
		return m.podDirError(name, err)
	}
	defer unix.Close(dfd)
	// 0750 whatever the umask, as makePodDataDirs' MkdirAll under
	// kubelet's umask of 0022.
	if err := unix.Fchmod(dfd, 0o750); err != nil {
		return err
	}
	return writeFileAt(dfd, podconfig.RecordFileName, data, 0o600)
}

// ReadRecord returns the pod record of the pod directory of uid. Its
// error matches fs.ErrNotExist when there is no such directory, and
// ErrNoRecord when the directory has no record.
func (m *Manager) ReadRecord(uid string) (Record, error) {
	if err := checkElem("pod UID", uid); err != nil {
		return Record{}, err
	}
	defer m.lockPod(uid)()
	return m.readRecord(uid)
}

func (m *Manager) readRecord(uid string) (Record, error) {
	pods, err := m.openPods()
	if err != nil {
		return Record{}, err
	}
	defer pods.Close()
	dfd, err := openDirAt(int(pods.Fd()), uid)
	if err != nil {
		return Record{}, m.podDirError(uid, err)
	}
	defer unix.Close(dfd)
	return readRecordAt(dfd, m.layout.RecordFile(types.UID(uid)), uid)
}

func readRecordAt(dfd int, path, uid string) (Record, error) {
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(dfd, podconfig.RecordFileName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if errors.Is(err, unix.ENOENT) {
		return Record{}, fmt.Errorf("%s: %w", path, ErrNoRecord)
	}
	if err != nil {
		return Record{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return Record{}, err
	} else if !fi.Mode().IsRegular() {
		return Record{}, fmt.Errorf("%s is not a regular file: %w", path, ErrNoRecord)
	}
	data, err := io.ReadAll(io.LimitReader(f, recordMaxBytes+1))
	if err != nil {
		return Record{}, err
	}
	if len(data) > recordMaxBytes {
		return Record{}, fmt.Errorf("%s is over %d bytes", path, recordMaxBytes)
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return Record{}, fmt.Errorf("%s: %w", path, err)
	}
	if rec.UID != uid {
		return Record{}, fmt.Errorf("%s records pod UID %q, not its directory's %q", path, rec.UID, uid)
	}
	return rec, nil
}

// Pods lists the pod directories under the root, by UID, with the agent's
// record of each (kubelet's listPodsFromDisk, which the agent uses after a
// restart to find the pods it had made). A directory without a record is
// listed with a nil Record; one whose record cannot be read with Err.
func (m *Manager) Pods() ([]PodDir, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pods, err := m.openPods()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer pods.Close()
	names, err := pods.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", m.layout.PodsDir(), err)
	}
	sort.Strings(names)
	var out []PodDir
	for _, uid := range names {
		if strings.HasPrefix(uid, newPodPrefix) {
			continue // a pod directory being made (WriteRecord removes it)
		}
		dfd, err := openDirAt(int(pods.Fd()), uid)
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOENT) {
			continue // not a pod directory (kubelet's listing skips files too)
		}
		pd := PodDir{UID: uid}
		if err != nil {
			pd.Err = &fs.PathError{Op: "open", Path: m.layout.PodDir(types.UID(uid)), Err: err}
			out = append(out, pd)
			continue
		}
		rec, err := readRecordAt(dfd, m.layout.RecordFile(types.UID(uid)), uid)
		unix.Close(dfd)
		switch {
		case err == nil:
			pd.Record = &rec
		case !errors.Is(err, ErrNoRecord):
			pd.Err = err
		}
		out = append(out, pd)
	}
	return out, nil
}

// openPods opens <root>/pods, refusing a symbolic link there.
func (m *Manager) openPods() (*os.File, error) {
	fd, err := openRetry(func() (int, error) {
		return unix.Open(m.layout.PodsDir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%s is not a directory (a symbolic link?): refused", m.layout.PodsDir())
		}
		return nil, &fs.PathError{Op: "open", Path: m.layout.PodsDir(), Err: err}
	}
	return os.NewFile(uintptr(fd), m.layout.PodsDir()), nil
}

// podDirError says why the pod directory name could not be opened.
func (m *Manager) podDirError(name string, err error) error {
	path := m.layout.PodDir(types.UID(name))
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return fmt.Errorf("%s is not a directory (a symbolic link?): refused", path)
	}
	return &fs.PathError{Op: "open", Path: path, Err: err}
}

// openDirAt opens the directory name in dirfd without following a link.
func openDirAt(dirfd int, name string) (int, error) {
	return openRetry(func() (int, error) {
		return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
}

// writeFileAt replaces the file name in dirfd with data, never half
// written and never through a link: a temporary file of a unique name
// (O_EXCL|O_NOFOLLOW), fsynced and renamed over name, then the directory
// fsynced. (pkg/statefile does the same for a state directory, but insists
// on the directory being 0700, which a pod directory is not: kubelet makes
// it 0750.)
func writeFileAt(dirfd int, name string, data []byte, perm uint32) error {
	var (
		tmp string
		fd  int
		err error
	)
	for range 100 {
		tmp = "." + name + ".tmp-" + strconv.FormatUint(rand.Uint64(), 36)
		fd, err = openRetry(func() (int, error) {
			return unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
		})
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirfd, tmp, dirfd, name)
	}
	if err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := fsyncRetry(dirfd); err != nil {
		return fmt.Errorf("writing %s: syncing its directory: %w", name, err)
	}
	return nil
}

func openRetry(open func() (int, error)) (int, error) {
	for {
		fd, err := open()
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

func fsyncRetry(fd int) error {
	for {
		if err := unix.Fsync(fd); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
