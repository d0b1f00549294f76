package logs

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

// fakeReopener reopens as containerd does (a new empty file at the log
// path), or fails with err.
type fakeReopener struct {
	mu    sync.Mutex
	paths map[string]string // container ID → log path
	err   error
	calls []string
}

func (f *fakeReopener) ReopenContainerLog(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, id)
	if f.err != nil {
		return f.err
	}
	return os.WriteFile(f.paths[id], nil, 0o640)
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o640))
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func target(id, path string, state cri.ContainerState) Target {
	return Target{Namespace: "ns", Pod: "pod", PodUID: "uid", Container: &cri.Container{ID: id, Name: "c-" + id, State: state, LogPath: path}}
}

// TestManagerStep is kubelet's TestRotateLogs, on files, with the
// manager's round.
func TestManagerStep(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	ts := now.Format(TimestampFormat)
	writeFiles(t, dir, map[string]string{
		"test-log-1":                    "short",
		"test-log-2":                    "longer than 10 bytes",
		"test-log-3":                    "longer than 10 bytes",
		"test-log-4":                    "longer than 10 bytes",
		"test-log-3.00000000-000001":    "the length doesn't matter",
		"test-log-3.00000000-000000.gz": "the length doesn't matter",
	})
	path := func(n string) string { return filepath.Join(dir, n) }
	targets := []Target{
		target("not-need-rotate", path("test-log-1"), cri.StateRunning),
		target("need-rotate", path("test-log-2"), cri.StateRunning),
		target("has-excess-log", path("test-log-3"), cri.StateRunning),
		target("not-running", path("test-log-4"), cri.StateExited),
	}
	rt := &fakeReopener{paths: map[string]string{"need-rotate": path("test-log-2"), "has-excess-log": path("test-log-3")}}
	reg := prometheus.NewRegistry()
	m, err := NewManager(rt, func() []Target { return targets }, Config{PodLogsDir: os.TempDir(), MaxSize: 10, MaxFiles: 3, MaxWorkers: 10},
		WithClock(testingclock.NewFakeClock(now)), WithRegisterer(reg))
	require.NoError(t, err)
	m.Step(t.Context())

	assert.Equal(t, []string{
		"test-log-1",
		"test-log-2",
		"test-log-2." + ts,
		"test-log-3",
		"test-log-3.00000000-000001.gz",
		"test-log-3." + ts,
		"test-log-4",
	}, dirNames(t, dir))
	assert.ElementsMatch(t, []string{"need-rotate", "has-excess-log"}, rt.calls)
	gz, err := os.Open(path("test-log-3.00000000-000001.gz"))
	require.NoError(t, err)
	defer gz.Close()
	zr, err := gzip.NewReader(gz)
	require.NoError(t, err)
	content, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Equal(t, "the length doesn't matter", string(content))

	n, ok := m.LogBytes("need-rotate")
	assert.True(t, ok)
	assert.Equal(t, int64(len("longer than 10 bytes")), n)
	_, ok = m.LogBytes("not-running")
	assert.False(t, ok, "a container not running is not kept")
	assert.Equal(t, 2.0, testutil.ToFloat64(m.metrics.rotations.WithLabelValues("ns", "pod", "uid", "c-need-rotate"))+
		testutil.ToFloat64(m.metrics.rotations.WithLabelValues("ns", "pod", "uid", "c-has-excess-log")))
	assert.Equal(t, 3, testutil.CollectAndCount(reg, "cri_prober_container_log_bytes"))
	all := m.AllLogBytes()
	require.Len(t, all, 3, "the running containers, as the series")
	assert.Contains(t, all, ContainerLogBytes{Namespace: "ns", Pod: "pod", PodUID: "uid", Container: "c-need-rotate", ContainerID: "need-rotate",
		Bytes: int64(len("longer than 10 bytes"))})

	targets = targets[:1] // the others gone: their series with them
	m.Step(t.Context())
	assert.Equal(t, 1, testutil.CollectAndCount(reg, "cri_prober_container_log_bytes"))
	assert.Equal(t, 0, testutil.CollectAndCount(reg, "cri_prober_container_log_rotations_total"))
	assert.Len(t, m.AllLogBytes(), 1, "the others forgotten")
}

// TestRotateLatestFailed is kubelet's TestRotateLatestLog: a failed
// reopen renames the file back, to be rotated again at the next round.
func TestRotateLatestFailed(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	writeFiles(t, dir, map[string]string{"0.log": "longer than 10 bytes"})
	rt := &fakeReopener{err: errors.New("random error")}
	m, err := NewManager(rt, func() []Target { return []Target{target("c", log, cri.StateRunning)} }, Config{PodLogsDir: os.TempDir(), MaxSize: 10, MaxFiles: 2})
	require.NoError(t, err)
	m.Step(t.Context())
	assert.Equal(t, []string{"0.log"}, dirNames(t, dir))
	assert.Equal(t, []string{"c"}, rt.calls)
}

// A missing current file is reopened (kubelet's processContainer).
func TestMissingLogReopened(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	rt := &fakeReopener{paths: map[string]string{"c": log}}
	m, err := NewManager(rt, func() []Target { return []Target{target("c", log, cri.StateRunning)} }, Config{PodLogsDir: os.TempDir()})
	require.NoError(t, err)
	m.Step(t.Context())
	assert.Equal(t, []string{"0.log"}, dirNames(t, dir))
	assert.Equal(t, []string{"c"}, rt.calls)
}

// TestCompressKeepsMode is kubelet's TestCompressLog.
func TestCompressKeepsMode(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"0.log.1": "test log content"})
	require.NoError(t, os.Chmod(filepath.Join(dir, "0.log.1"), 0o604))
	d, err := openDir(dir, 1)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.compress(t.Context(), "0.log.1", 1<<20))
	info, err := os.Stat(filepath.Join(dir, "0.log.1.gz"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o604), info.Mode().Perm()&^umask(t))
	assert.Equal(t, []string{"0.log.1.gz"}, dirNames(t, dir), "no temporary file, no original")
	assert.Error(t, d.compress(t.Context(), "unknown", 1<<20))
}

func umask(t *testing.T) os.FileMode {
	t.Helper()
	p := filepath.Join(t.TempDir(), "probe")
	require.NoError(t, os.WriteFile(p, nil, 0o777))
	info, err := os.Stat(p)
	require.NoError(t, err)
	return 0o777 &^ info.Mode().Perm()
}

// Links a container planted in its log directory are never followed:
// not as the current file, not among the rotated ones, not on the
// directory's path.
func TestPlantedLinksNotFollowed(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	writeFiles(t, outside, map[string]string{"secret": "longer than 10 bytes, not a log"})

	t.Run("current file a link", func(t *testing.T) {
		dir := t.TempDir()
		log := filepath.Join(dir, "0.log")
		require.NoError(t, os.Symlink(secret, log))
		rt := &fakeReopener{paths: map[string]string{"c": log}}
		m, err := NewManager(rt, func() []Target { return []Target{target("c", log, cri.StateRunning)} }, Config{PodLogsDir: os.TempDir(), MaxSize: 10, MaxFiles: 3})
		require.NoError(t, err)
		m.Step(t.Context())
		assert.Equal(t, []string{"0.log"}, dirNames(t, dir))
		assert.Empty(t, rt.calls)
		_, ok := m.LogBytes("c")
		assert.False(t, ok)
	})
	t.Run("a rotated file a link", func(t *testing.T) {
		dir := t.TempDir()
		log := filepath.Join(dir, "0.log")
		writeFiles(t, dir, map[string]string{"0.log": "longer than 10 bytes"})
		require.NoError(t, os.Symlink(secret, log+".00000000-000000"))
		rt := &fakeReopener{paths: map[string]string{"c": log}}
		now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
		m, err := NewManager(rt, func() []Target { return []Target{target("c", log, cri.StateRunning)} }, Config{PodLogsDir: os.TempDir(), MaxSize: 10, MaxFiles: 2},
			WithClock(testingclock.NewFakeClock(now)))
		require.NoError(t, err)
		m.Step(t.Context())
		assert.Equal(t, []string{"0.log", "0.log.00000000-000000", "0.log." + now.Format(TimestampFormat)}, dirNames(t, dir))
		info, err := os.Lstat(log + ".00000000-000000")
		require.NoError(t, err)
		assert.Equal(t, os.ModeSymlink, info.Mode().Type(), "left alone, not compressed")
		content, err := os.ReadFile(secret)
		require.NoError(t, err)
		assert.Equal(t, "longer than 10 bytes, not a log", string(content))
	})
	t.Run("the directory a link", func(t *testing.T) {
		real := t.TempDir()
		writeFiles(t, real, map[string]string{"0.log": "longer than 10 bytes"})
		dir := filepath.Join(t.TempDir(), "c")
		require.NoError(t, os.Symlink(real, dir))
		log := filepath.Join(dir, "0.log")
		rt := &fakeReopener{paths: map[string]string{"c": log}}
		m, err := NewManager(rt, func() []Target { return []Target{target("c", log, cri.StateRunning)} }, Config{PodLogsDir: os.TempDir(), MaxSize: 10, MaxFiles: 2})
		require.NoError(t, err)
		m.Step(t.Context())
		assert.Equal(t, []string{"0.log"}, dirNames(t, real))
		assert.Empty(t, rt.calls)
	})
}

// With the fake runtime, which reopens as containerd does: lines written
// after a rotation go to the new file.
func TestRotateWithRuntime(t *testing.T) {
	dir := t.TempDir()
	rt := fakeruntime.New()
	sb := rt.AddSandbox("ns", "pod", "uid", fakeruntime.WithLogDirectory(dir))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "app"), 0o755))
	id := rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithLogPath("app/0.log"))
	log := filepath.Join(dir, "app", "0.log")
	require.NoError(t, rt.WriteLog(id, "stdout", strings.Repeat("x", 20)))
	clk := testingclock.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	m, err := NewManager(rt.Direct(), func() []Target { return []Target{target(id, log, cri.StateRunning)} }, Config{PodLogsDir: os.TempDir(), MaxSize: 10, MaxFiles: 3},
		WithClock(clk))
	require.NoError(t, err)
	m.Step(t.Context())
	require.NoError(t, rt.WriteLog(id, "stdout", "after"))
	content, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Contains(t, string(content), " stdout F after\n")
	assert.NotContains(t, string(content), "xxx")

	clk.Step(time.Minute)
	require.NoError(t, rt.WriteLog(id, "stdout", strings.Repeat("y", 20)))
	m.Step(t.Context())
	names := dirNames(t, filepath.Join(dir, "app"))
	assert.Len(t, names, 3)
	assert.True(t, slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, CompressSuffix) }), names)
}

func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "defaults", cfg: Config{}},
		{name: "max files 1", cfg: Config{MaxFiles: 1}, want: "invalid configuration: containerLogMaxFiles must be greater than 1"},
		{name: "workers", cfg: Config{MaxWorkers: -1}, want: "containerLogMaxWorkers must be greater than or equal to 1"},
		{name: "interval", cfg: Config{MonitorInterval: time.Second}, want: "containerLogMonitorInterval must be a positive time duration greater than or equal to 3s"},
		{name: "max files bound", cfg: Config{MaxFiles: MaxMaxFiles + 1}, want: "invalid configuration: containerLogMaxFiles must be at most 1024"},
		{name: "link dir", cfg: Config{LinkDir: "var/log"}, want: "must be an absolute path"},
		{name: "pod logs dir", cfg: Config{PodLogsDir: "var/log/pods"}, want: "must be an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Check()
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// Run's workers stop with it.
func TestManagerRun(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	writeFiles(t, dir, map[string]string{"0.log": "longer than 10 bytes"})
	rt := &fakeReopener{paths: map[string]string{"c": log}}
	m, err := NewManager(rt, func() []Target { return []Target{target("c", log, cri.StateRunning)} }, Config{PodLogsDir: os.TempDir(), MaxSize: 10, MaxFiles: 2, MaxWorkers: 3})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { _, ok := m.LogBytes("c"); return ok }, 10*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	assert.Len(t, dirNames(t, dir), 2)
}

// Names planted beside a log, however many, neither count as its rotated
// files nor stop its rotation; past the listing's bound the log is still
// rotated and the oldest rotated files found removed, a batch a round.
func TestRotationWithPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	writeFiles(t, dir, map[string]string{"0.log": strings.Repeat("x", 100)})
	for i := range maxListed + 1 {
		writeFiles(t, dir, map[string]string{fmt.Sprintf("0.log.junk%05d", i): ""})
	}
	rt := &fakeReopener{paths: map[string]string{"c": log}}
	clk := testingclock.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	m, err := NewManager(rt, func() []Target { return []Target{target("c", log, cri.StateRunning)} }, Config{PodLogsDir: dir, MaxSize: 10, MaxFiles: 2},
		WithClock(clk))
	require.NoError(t, err)
	m.Step(t.Context())
	assert.FileExists(t, log+".20260304-050607", "rotated")
	assert.Equal(t, []string{"c"}, rt.calls)

	for i := range maxListed + 1 {
		writeFiles(t, dir, map[string]string{fmt.Sprintf("0.log.%08d-000000", i): "z"})
	}
	rounds := 0
	for ; rounds < 5; rounds++ {
		writeFiles(t, dir, map[string]string{"0.log": strings.Repeat("x", 100)})
		clk.Step(time.Minute)
		m.Step(t.Context())
		if files, _, full, err := openAndList(t, dir); assert.NoError(t, err) && !full && len(files) <= 1 {
			break
		}
	}
	assert.Less(t, rounds, 5, "the planted rotated names removed, in batches")
}

func openAndList(t *testing.T, dir string) ([]file, []string, bool, error) {
	d, err := openDir(dir, 1)
	require.NoError(t, err)
	defer d.Close()
	return d.list(rotatedOf("0.log"))
}

// A planted rotated file larger than the runtime could write (a sparse
// terabyte) is removed, not compressed, and a compression stops with the
// context.
func TestCompressBounded(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	writeFiles(t, dir, map[string]string{"0.log": strings.Repeat("x", 100)})
	f, err := os.Create(log + ".99999999-999999")
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<40))
	require.NoError(t, f.Close())
	rt := &fakeReopener{paths: map[string]string{"c": log}}
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	m, err := NewManager(rt, func() []Target { return []Target{target("c", log, cri.StateRunning)} }, Config{PodLogsDir: dir, MaxSize: 10, MaxFiles: 5},
		WithClock(testingclock.NewFakeClock(now)))
	require.NoError(t, err)
	m.Step(t.Context())
	assert.Equal(t, []string{"0.log", "0.log." + now.Format(TimestampFormat)}, dirNames(t, dir), "removed, and the log rotated")

	writeFiles(t, dir, map[string]string{"big": strings.Repeat("y", 1<<20)})
	d, err := openDir(dir, 1)
	require.NoError(t, err)
	defer d.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	assert.ErrorIs(t, d.compress(ctx, "big", 2<<20), context.Canceled)
	assert.NotContains(t, dirNames(t, dir), "big.gz")
}

// A device planted under a rotated file's name is never opened for
// reading (opening some has effects), nor is a FIFO (whose open blocks).
func TestOpenRegularRefusesOthers(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	d, err := openDir(dir, 1)
	require.NoError(t, err)
	defer d.Close()
	_, err = d.openRegular("fifo")
	assert.ErrorContains(t, err, "not a regular file")
	require.NoError(t, os.Symlink("/dev/null", filepath.Join(dir, "null")))
	_, err = d.openRegular("null")
	assert.ErrorContains(t, err, "not a regular file")
}

// The log manager acts only on a log under the pod logs directory.
func TestManagerOnlyUnderThePodLogsDir(t *testing.T) {
	root, etc := t.TempDir(), t.TempDir()
	writeFiles(t, etc, map[string]string{"shadow": "longer than 10 bytes"})
	rt := &fakeReopener{paths: map[string]string{"c": filepath.Join(etc, "shadow")}}
	m, err := NewManager(rt, func() []Target { return []Target{target("c", filepath.Join(etc, "shadow"), cri.StateRunning)} }, Config{PodLogsDir: root, MaxSize: 10, MaxFiles: 2})
	require.NoError(t, err)
	m.Step(t.Context())
	assert.Equal(t, []string{"shadow"}, dirNames(t, etc))
	assert.Empty(t, rt.calls)
	_, ok := m.LogBytes("c")
	assert.False(t, ok)
}

// A negative containerLogMaxSize is kubelet's stub manager: no rotation,
// a missing log not reopened; the bytes are still counted.
func TestManagerStub(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"0.log": "longer than 10 bytes"})
	rt := &fakeReopener{paths: map[string]string{"c": filepath.Join(dir, "0.log"), "gone": filepath.Join(dir, "1.log")}}
	reg := prometheus.NewRegistry()
	m, err := NewManager(rt, func() []Target {
		return []Target{target("c", filepath.Join(dir, "0.log"), cri.StateRunning), target("gone", filepath.Join(dir, "1.log"), cri.StateRunning)}
	}, Config{PodLogsDir: dir, MaxSize: -1}, WithRegisterer(reg))
	require.NoError(t, err)
	m.Step(t.Context())
	assert.Equal(t, []string{"0.log"}, dirNames(t, dir))
	assert.Empty(t, rt.calls)
	n, ok := m.LogBytes("c")
	assert.True(t, ok)
	assert.Equal(t, int64(len("longer than 10 bytes")), n)
	assert.Equal(t, 1, testutil.CollectAndCount(reg, "kubelet_container_log_filesystem_used_bytes"))
}
