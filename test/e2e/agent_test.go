//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	engine "github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/manifests"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/restart"
)

// agent is the probe engine running in-process against the real
// containerd, wired as `cri-prober run` wires it (pkg/agent), with its
// report and events in reach.
type agent struct {
	engine       *engine.Agent
	restarter    *restart.Restarter
	events       *eventLog
	manifestsDir string
}

// startAgent runs the engine until the test ends. Manifests are read from
// a fresh directory the test writes to with writeManifest.
func startAgent(t *testing.T, c *cri.Client) *agent {
	t.Helper()
	return startAgentWith(t, c)
}

// startAgentWith is startAgent with more manager options.
func startAgentWith(t *testing.T, c *cri.Client, opts ...prober.Option) *agent {
	t.Helper()
	return startAgentConfig(t, c, func(cfg *engine.Config) { cfg.TestProberOptions = opts })
}

// startAgentConfig is startAgent with the engine's config changed by edit.
func startAgentConfig(t *testing.T, c *cri.Client, edit func(*engine.Config)) *agent {
	t.Helper()
	a := &agent{events: &eventLog{}, manifestsDir: t.TempDir()}
	dir := manifests.NewDir(a.manifestsDir, nil)
	dir.Reload()
	cfg := engine.Config{
		Client: c, EventsAddress: c.Socket(), Manifests: dir, ManifestInterval: 100 * time.Millisecond,
		Restart: restart.Recreate, Recorder: a.events,
	}
	edit(&cfg)
	var err error
	a.engine, err = engine.New(context.Background(), cfg)
	require.NoError(t, err)
	a.restarter = a.engine.Restarter
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { a.engine.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if t.Failed() {
			t.Logf("events:\n%s", a.events)
		}
	})
	return a
}

// podManifest is a Pod manifest for pod name in the test namespace;
// containers is the YAML list under spec.containers, indented by 2.
func podManifest(name, containers string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  containers:\n%s", name, testNamespace, containers)
}

// manifestDir writes podManifest(name, containers) into a new directory,
// for an agent started as a process, and returns the directory.
func manifestDir(t *testing.T, name, containers string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pod.yaml"), []byte(podManifest(name, containers)), 0o644))
	return dir
}

// writeManifest writes a Pod manifest for pod name whose containers are
// given as YAML (the list under spec.containers, indented by 2).
func (a *agent) writeManifest(t *testing.T, file, name, containers string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(a.manifestsDir, file), []byte(podManifest(name, containers)), 0o644))
}

func (a *agent) pod(name string) (pods.PodReport, bool) {
	return a.engine.ReportPod(testNamespace, name)
}

func (a *agent) container(podName, name string) (pods.ContainerReport, bool) {
	p, ok := a.pod(podName)
	if !ok {
		return pods.ContainerReport{}, false
	}
	for _, c := range p.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return pods.ContainerReport{}, false
}

// waitFor polls a container's report until cond holds or timeout passes,
// and returns when it first held.
func (a *agent) waitFor(t *testing.T, podName, name, what string, timeout time.Duration, cond func(pods.ContainerReport) bool) time.Time {
	t.Helper()
	var at time.Time
	eventually(t, timeout, podName+"/"+name+": "+what, func() bool {
		c, ok := a.container(podName, name)
		if ok && cond(c) {
			at = time.Now()
			return true
		}
		return false
	})
	return at
}

func (a *agent) waitReady(t *testing.T, podName, name string, want bool, timeout time.Duration) time.Time {
	t.Helper()
	return a.waitFor(t, podName, name, fmt.Sprintf("ready=%v", want), timeout, func(c pods.ContainerReport) bool {
		return c.State == cri.StateRunning && c.Ready == want
	})
}

// eventLog collects the engine's events.
type eventLog struct {
	mu     sync.Mutex
	events []events.Event
}

func (l *eventLog) Record(e events.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// matching returns the events of a pod's container with this reason whose
// message contains substr.
func (l *eventLog) matching(podName, ctr, reason, substr string) []events.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []events.Event
	for _, e := range l.events {
		if e.Pod == podName && (ctr == "" || e.Container == ctr) && e.Reason == reason && strings.Contains(e.Message, substr) {
			out = append(out, e)
		}
	}
	return out
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, e := range l.events {
		fmt.Fprintf(&b, "%s %s %s/%s %s: %s\n", e.Time.Format("15:04:05.000"), e.Type, e.Pod, e.Container, e.Reason, e.Message)
	}
	return b.String()
}

// waitEvent waits for an event and returns the first that matches.
func (a *agent) waitEvent(t *testing.T, podName, ctr, reason, substr string, timeout time.Duration) events.Event {
	t.Helper()
	var ev events.Event
	eventually(t, timeout, fmt.Sprintf("event %s %q for %s/%s", reason, substr, podName, ctr), func() bool {
		if m := a.events.matching(podName, ctr, reason, substr); len(m) > 0 {
			ev = m[0]
			return true
		}
		return false
	})
	return ev
}
