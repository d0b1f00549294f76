package prober

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
	"github.com/cri-prober/cri-prober/pkg/statefile"
)

// Where a previous agent left a probe (--state-dir): readiness and started
// are taken over, and the run toward a threshold; a liveness or startup
// Failure is not (acting on it is this agent's decision).
func TestWorkerResumes(t *testing.T) {
	tests := []struct {
		name      string
		probeType results.ProbeType
		saved     *results.Saved
		want      results.Result
		wantRun   int
	}{
		{"nothing saved: kubelet's initial value", readiness, nil, results.Failure, 0},
		{"ready stays ready", readiness, &results.Saved{Result: results.Success, LastOutcome: results.Success, Consecutive: 7}, results.Success, 7},
		{"not ready stays not ready", readiness, &results.Saved{Result: results.Failure, LastOutcome: results.Failure, Consecutive: 2}, results.Failure, 2},
		{"started stays started", results.Startup, &results.Saved{Result: results.Success, LastOutcome: results.Success, Consecutive: 1}, results.Success, 1},
		{"a liveness failure is not taken over, its run is", liveness, &results.Saved{Result: results.Failure, LastOutcome: results.Failure, Consecutive: 3}, results.Success, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wt := newWorkerTest(t, tt.probeType, func(p *corev1.Probe) { p.FailureThreshold = 5 })
			wt.w.restore = func(k results.Key) (results.Saved, bool) {
				if tt.saved == nil || k.ContainerID != testID {
					return results.Saved{}, false
				}
				return *tt.saved, true
			}
			wt.w.containerID = testID // as step sets it for a new container
			assert.Equal(t, tt.want, wt.w.resume())
			assert.Equal(t, tt.wantRun, wt.w.resultRun)
		})
	}
}

func TestProbeStateFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	state := map[results.Key]results.Saved{
		{ContainerID: "a", Type: results.Readiness}: {Result: results.Success, LastOutcome: results.Success, Consecutive: 4},
		{ContainerID: "a", Type: results.Startup}:   {Result: results.Success},
	}
	require.NoError(t, saveProbeState(dir, state))
	got, err := loadWarned(t, dir)
	require.NoError(t, err)
	assert.Equal(t, state, got)

	got, err = loadWarned(t, filepath.Join(dir, "none"))
	assert.NoError(t, err, "no file: a first start")
	assert.Nil(t, got)

	require.NoError(t, os.WriteFile(filepath.Join(dir, probeStateFile), []byte("[{"), 0o640))
	got, err = loadWarned(t, dir)
	assert.ErrorContains(t, err, "moved to "+filepath.Join(dir, probeStateFile)+".bad")
	assert.Nil(t, got)
}

// An agent restart on the same state directory does not turn a ready
// container not ready, though the new agent's first probe fails; a
// container it does not know starts from kubelet's initial value.
func TestManagerStateAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	annotations := map[string]string{spec.ReadinessAnnotation: probeJSON("ready", 10)}
	first := newManagerTestConfig(t, Config{StateDir: dir})
	sb := first.rt.AddSandbox("ns", "web", "uid-web")
	id := first.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAnnotations(annotations))
	first.relist(t)
	first.eventually(t, "ready", func() bool { return first.ready("web", "app") })
	first.clock.Step(time.Second) // a resync: the state is written
	first.eventually(t, "saved", func() bool {
		s, warning, err := loadProbeState(dir)
		sv, ok := s[results.Key{ContainerID: id, Type: results.Readiness}]
		return err == nil && warning == nil && ok && sv.Result == results.Success // Success is Result's zero value: ok says it was saved
	})

	next := newManagerTestConfig(t, Config{StateDir: dir})
	next.runner.set("ready", results.Failure)
	sb = next.rt.AddSandbox("ns", "web", "uid-web")
	next.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAnnotations(annotations), fakeruntime.WithID(id))
	other := next.rt.AddSandbox("ns", "db", "uid-db")
	next.rt.AddContainer(other, "db", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAnnotations(annotations))
	next.relist(t)
	next.eventually(t, "probed once", func() bool { return next.runner.count("ready") >= 2 })
	assert.True(t, next.ready("web", "app"), "still ready: one failure of three")
	assert.False(t, next.ready("db", "db"), "unknown to the previous agent: kubelet's initial value")
}

// outside is a file outside the state directory that links planted in it
// point to: it must never be written, nor read through them.
func outside(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "precious")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func assertContent(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, string(got), "written through a planted link")
}

// Links planted in the state directory are never followed: not at the
// file's name, not at a temporary name (the fixed probes.json.tmp of
// before); the file read through a link is refused and set aside, and a
// FIFO there does not block the agent.
func TestProbeStateFollowsNoLink(t *testing.T) {
	state := map[results.Key]results.Saved{{ContainerID: "a", Type: results.Readiness}: {Result: results.Success}}
	const evil = `[{"containerId":"evil","type":"Readiness","result":"Success"}]`

	t.Run("save", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.Mkdir(dir, 0o700))
		target := outside(t, evil)
		require.NoError(t, os.Symlink(target, filepath.Join(dir, probeStateFile)))
		require.NoError(t, os.Symlink(target, filepath.Join(dir, probeStateFile+".tmp")))
		require.NoError(t, saveProbeState(dir, state))
		assertContent(t, target, evil)
		fi, err := os.Lstat(filepath.Join(dir, probeStateFile))
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), "the link at the name replaced, not followed")
		got, err := loadWarned(t, dir)
		require.NoError(t, err)
		assert.Equal(t, state, got)
	})

	t.Run("load", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.Mkdir(dir, 0o700))
		target := outside(t, evil)
		require.NoError(t, os.Symlink(target, filepath.Join(dir, probeStateFile)))
		got, err := loadWarned(t, dir)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "is a symbolic link")
		assert.Contains(t, err.Error(), "moved to "+filepath.Join(dir, probeStateFile)+".bad")
		assert.Nil(t, got, "nothing read through the link")
		assertContent(t, target, evil)
	})

	t.Run("a FIFO", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.Mkdir(dir, 0o700))
		require.NoError(t, unix.Mkfifo(filepath.Join(dir, probeStateFile), 0o600))
		done := make(chan error, 1)
		go func() {
			_, warning, err := loadProbeState(dir)
			done <- errors.Join(warning, err)
		}()
		select {
		case err := <-done:
			require.Error(t, err)
			assert.Contains(t, err.Error(), "is not a regular file")
		case <-time.After(30 * time.Second): // a deadline for a hang, not a timing
			t.Fatal("blocked on a FIFO")
		}
	})

	t.Run("too large", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.Mkdir(dir, 0o700))
		f, err := os.Create(filepath.Join(dir, probeStateFile))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(probeStateFormat.Limit+1)) // sparse
		require.NoError(t, f.Close())
		got, err := loadWarned(t, dir)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "over its limit")
		assert.Nil(t, got)
		assert.FileExists(t, filepath.Join(dir, probeStateFile+".bad"))
	})
}

// The state directory is the agent's own: a new one is 0700 with a 0600
// file; a link in its place or one that others can write is refused, and
// nothing is written there.
func TestProbeStateDirectory(t *testing.T) {
	state := map[results.Key]results.Saved{{ContainerID: "a", Type: results.Readiness}: {Result: results.Success}}
	dir := filepath.Join(t.TempDir(), "state")
	require.NoError(t, saveProbeState(dir, state))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Join(dir, probeStateFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Symlink(real, link))
	err = saveProbeState(link, state)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is a symbolic link")
	assert.NoFileExists(t, filepath.Join(real, probeStateFile))

	open := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(open, 0o700))
	require.NoError(t, os.Chmod(open, 0o777))
	err = saveProbeState(open, state)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "chmod 0700 "+open)
	assert.NoFileExists(t, filepath.Join(open, probeStateFile))
}

// The file carries its format version. One of a newer version is not
// read, and is set aside rather than overwritten; the file of before the
// version (a bare list) is read.
func TestProbeStateVersion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	state := map[results.Key]results.Saved{{ContainerID: "a", Type: results.Readiness}: {Result: results.Success, Consecutive: 2}}
	require.NoError(t, saveProbeState(dir, state))
	raw, err := os.ReadFile(filepath.Join(dir, probeStateFile))
	require.NoError(t, err)
	var head struct {
		Version int             `json:"version"`
		Probes  json.RawMessage `json:"probes"`
	}
	require.NoError(t, json.Unmarshal(raw, &head), string(raw))
	assert.Equal(t, 1, head.Version)
	assert.NotEmpty(t, head.Probes)

	newer := `{"version":2,"probes":{"a":"in a format this agent does not know"}}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, probeStateFile), []byte(newer), 0o600))
	got, err := loadWarned(t, dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has format version 2, newer than this agent's 1")
	assert.Contains(t, err.Error(), "moved to "+filepath.Join(dir, probeStateFile)+".v2")
	assert.Nil(t, got)
	require.NoError(t, saveProbeState(dir, state))
	assertContent(t, filepath.Join(dir, probeStateFile+".v2"), newer)
	got, err = loadWarned(t, dir)
	require.NoError(t, err)
	assert.Equal(t, state, got)

	old, err := json.Marshal([]savedProbe{{ContainerID: "a", Type: "Readiness", Saved: state[results.Key{ContainerID: "a", Type: results.Readiness}]}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, probeStateFile), old, 0o600))
	got, err = loadWarned(t, dir)
	require.NoError(t, err)
	assert.Equal(t, state, got)

	require.NoError(t, os.WriteFile(filepath.Join(dir, probeStateFile), []byte(`{"probes":[]}`), 0o600))
	_, err = loadWarned(t, dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no format version")
}

// loadWarned is loadProbeState on a directory that can be used: its error
// is the warning, a *statefile.Warning (the file set aside).
func loadWarned(t *testing.T, dir string) (map[results.Key]results.Saved, error) {
	t.Helper()
	got, warning, err := loadProbeState(dir)
	require.NoError(t, err, "the directory can be used")
	if warning != nil {
		var w *statefile.Warning
		require.ErrorAs(t, warning, &w)
	}
	return got, warning
}

// The probes' state written by today's agent loads, in both formats
// (testdata/probes-v*.json).
func TestProbeStateLoadsTodaysFiles(t *testing.T) {
	want := map[results.Key]results.Saved{{ContainerID: "c0", Type: results.Readiness}: {Result: results.Success, LastOutcome: results.Failure, Consecutive: 2}}
	for _, name := range []string{"probes-v1.json", "probes-v0.json"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", name))
			require.NoError(t, err)
			dir := filepath.Join(t.TempDir(), "state")
			require.NoError(t, os.Mkdir(dir, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(dir, probeStateFile), raw, 0o600))
			got, warning := loadWarned(t, dir)
			require.NoError(t, warning)
			assert.Equal(t, want, got)
		})
	}
}

// NewManager reads the state directory, not its option: a directory that
// cannot be used fails NewManager, a file set aside is a warning.
func TestManagerLoadsStateInItsConstructor(t *testing.T) {
	open := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(open, 0o700))
	require.NoError(t, os.Chmod(open, 0o777))
	_, err := NewManager(nil, results.NewStore(), Config{StateDir: open}, withRunner(&scriptedRunner{}))
	assert.ErrorContains(t, err, "chmod 0700 "+open)

	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, probeStateFile), []byte("{"), 0o600))
	m, err := NewManager(nil, results.NewStore(), Config{StateDir: dir}, withRunner(&scriptedRunner{}))
	require.NoError(t, err)
	var w *statefile.Warning
	require.ErrorAs(t, m.stateWarning, &w)
	assert.Equal(t, filepath.Join(dir, probeStateFile+".bad"), w.Aside)
}
