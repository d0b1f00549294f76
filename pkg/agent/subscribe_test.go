package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// A subscriber is told of every change the report shows, down to a
// liveness probe's first run, which changes no stable result (liveness
// starts at Success): wait --for healthy needs that run, and waits for
// nothing else to tell it.
func TestSubscribeTellsOfEveryRun(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	rt.SetExecHandler(func(context.Context, string, []string, time.Duration) (*runtimeapi.ExecSyncResponse, error) {
		return &runtimeapi.ExecSyncResponse{ExitCode: 0}, nil
	})
	sb := rt.AddSandbox("ci", "web", "uid-web", fakeruntime.WithIP("10.1.2.3"))
	rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAnnotations(map[string]string{
		spec.LivenessAnnotation: `{"exec":{"command":["check"]},"periodSeconds":1}`,
	}))
	client, err := cri.Dial(t.Context(), rt.Endpoint())
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	engine, err := New(t.Context(), Config{Client: client, Poller: cri.PollerConfig{RelistPeriod: time.Hour}, Recorder: recorders{}, Prober: prober.Config{NoStartupJitter: true}})
	require.NoError(t, err)
	sub := engine.Subscribe()
	defer sub.Close()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { engine.Run(ctx) })
	defer wg.Wait()
	defer cancel()

	ran := func() bool {
		report, ok := engine.ReportPod("ci", "web")
		if !ok || len(report.Containers) == 0 {
			return false
		}
		for _, p := range report.Containers[0].Probes {
			if p.Type == results.Liveness && p.Last != nil {
				return true
			}
		}
		return false
	}
	deadline := time.After(10 * time.Second)
	for !ran() {
		select {
		case <-sub.Changed():
		case <-deadline:
			t.Fatal("no change told after the liveness probe's run")
		}
	}
	sub.Close()
	sub.Close() // idempotent
}
