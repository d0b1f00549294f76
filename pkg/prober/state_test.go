package prober

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
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
	got, err := loadProbeState(dir)
	require.NoError(t, err)
	assert.Equal(t, state, got)

	got, err = loadProbeState(filepath.Join(dir, "none"))
	assert.NoError(t, err, "no file: a first start")
	assert.Nil(t, got)

	require.NoError(t, os.WriteFile(filepath.Join(dir, probeStateFile), []byte("[{"), 0o640))
	got, err = loadProbeState(dir)
	assert.ErrorContains(t, err, "moved to "+filepath.Join(dir, probeStateFile)+".bad")
	assert.Nil(t, got)
}

// An agent restart on the same state directory does not turn a ready
// container not ready, though the new agent's first probe fails; a
// container it does not know starts from kubelet's initial value.
func TestManagerStateAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	annotations := map[string]string{spec.ReadinessAnnotation: probeJSON("ready", 10)}
	first := newManagerTest(t, WithStateDir(dir))
	sb := first.rt.AddSandbox("ns", "web", "uid-web")
	id := first.rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAnnotations(annotations))
	first.relist(t)
	first.eventually(t, "ready", func() bool { return first.ready("web", "app") })
	first.clock.Step(time.Second) // a resync: the state is written
	first.eventually(t, "saved", func() bool {
		s, err := loadProbeState(dir)
		return err == nil && s[results.Key{ContainerID: id, Type: results.Readiness}].Result == results.Success
	})

	next := newManagerTest(t, WithStateDir(dir))
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
