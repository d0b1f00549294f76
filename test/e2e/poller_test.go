//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

// runLoops runs the poller (and the event watcher, if w is not nil) until
// the test ends.
func runLoops(t *testing.T, p *cri.Poller, w *cri.EventWatcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.Run(ctx) })
	if w != nil {
		wg.Go(func() { w.Run(ctx) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

func findPod(snap *cri.Snapshot, name string) *cri.Sandbox {
	for _, p := range snap.Sandboxes() {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Contract: the poller publishes a started pod with its namespace, name,
// UID and CNI IP, and its running container; the IP answers HTTP from the
// host as it would for kubelet's probes.
func TestPodIsSeenWithItsIPAndAnswersHTTP(t *testing.T) {
	parallel(t)
	c := dial(t)
	pod := runPod(t, c, "web")
	ctrID := pod.start("httpd", "sh", "-c", "echo hello-from-pod > /var/www/index.html && exec httpd -f -p 8080 -h /var/www")

	p, err := cri.NewPoller(c, cri.PollerConfig{})
	require.NoError(t, err)
	snap, err := p.Relist(t.Context())
	require.NoError(t, err)

	seen, ok := snap.Sandbox(pod.id)
	require.True(t, ok, "sandbox %s not in snapshot", pod.id)
	assert.Equal(t, testNamespace, seen.Namespace)
	assert.Equal(t, pod.config.GetMetadata().GetName(), seen.Name)
	assert.Equal(t, pod.config.GetMetadata().GetUid(), seen.UID)
	assert.Equal(t, cri.SandboxReady, seen.State)
	require.True(t, inSubnet(t, seen.IP("")), "pod IP %q is not in the CNI subnet %s", seen.IP(""), podSubnet)

	ctr, ok := snap.Container(ctrID)
	require.True(t, ok)
	assert.Equal(t, "httpd", ctr.Name)
	assert.Equal(t, cri.StateRunning, ctr.State)
	assert.False(t, ctr.StartedAt.IsZero())
	assert.Equal(t, busyboxImage, ctr.Image)

	url := fmt.Sprintf("http://%s:8080/", seen.IP(""))
	var body string
	eventually(t, 10*time.Second, "pod IP answers HTTP", func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	})
	assert.Equal(t, "hello-from-pod\n", body)
}

type exitSeen struct {
	id       string
	exitCode int32
	latency  time.Duration // from the container's FinishedAt to publication
}

// collectExits records, for each container in ids, how long after it
// finished (containerd's own timestamp) the poller published its exit.
func collectExits(t *testing.T, p *cri.Poller, ids []string, timeout time.Duration) []exitSeen {
	t.Helper()
	sub := p.Subscribe()
	defer sub.Close()
	deadline := time.After(timeout)
	var seen []exitSeen
	for len(seen) < len(ids) {
		select {
		case <-deadline:
			t.Fatalf("saw %d of %d exits within %s", len(seen), len(ids), timeout)
		case <-sub.Ready():
			now := time.Now()
			for _, ev := range sub.Next().Events {
				if ev.Type == cri.ContainerExited && slices.Contains(ids, ev.Container.ID) {
					seen = append(seen, exitSeen{id: ev.Container.ID, exitCode: ev.Container.ExitCode, latency: now.Sub(ev.Container.FinishedAt)})
				}
			}
		}
	}
	return seen
}

// startExiters starts containers that exit with codes 10, 11, … at times
// spread over more than a second, so their exits fall at different points
// of the relist period.
func startExiters(pod *pod, n int) []string {
	var ids []string
	for i := range n {
		ids = append(ids, pod.start(fmt.Sprintf("exit%d", i), "sh", "-c", fmt.Sprintf("sleep %.2f; exit %d", 1+0.27*float64(i), 10+i)))
	}
	return ids
}

func summarise(t *testing.T, label string, seen []exitSeen) time.Duration {
	t.Helper()
	lat := make([]time.Duration, 0, len(seen))
	for _, s := range seen {
		lat = append(lat, s.latency)
	}
	slices.Sort(lat)
	t.Logf("%s: %d exits, latency min %s median %s max %s (all: %v)", label, len(lat),
		lat[0].Round(time.Millisecond), lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), lat)
	return lat[len(lat)-1]
}

// Contract (issue 2): with containerd's event stream an exit is published
// at once, not at the next relist. The relist period is set to a minute,
// so an exit seen within seconds was seen through the event stream. How
// fast is logged (the target is 200 ms: median 112 ms, max 300 ms on a
// loaded 2-core machine); a bound that tight fails on a loaded CI machine.
func TestExitSeenThroughTheEventStream(t *testing.T) {
	parallel(t)
	c := dial(t)
	p, err := cri.NewPoller(c, cri.PollerConfig{RelistPeriod: time.Minute})
	require.NoError(t, err)
	w, err := cri.NewEventWatcher(c.Socket(), p)
	require.NoError(t, err)
	runLoops(t, p, w)
	eventually(t, 10*time.Second, "event stream connected", w.Connected)

	pod := runPod(t, c, "exit-events")
	ids := startExiters(pod, 6)
	seen := collectExits(t, p, ids, 30*time.Second)
	for i, s := range seen {
		assert.Less(t, s.latency, 5*time.Second, "exit %d of %s: far sooner than the 1-minute relist", i, s.id)
	}
	codes := map[string]int32{}
	for _, s := range seen {
		codes[s.id] = s.exitCode
	}
	for i, id := range ids {
		assert.Equal(t, int32(10+i), codes[id], "exit code of container %d", i)
	}
	summarise(t, "with event stream", seen)
}

// Contract (issue 2): without the event stream an exit is published within
// one relist period (plus what the relist itself takes, on a loaded machine
// up to a few hundred milliseconds).
func TestExitSeenWithinOneRelistPeriodWithoutEvents(t *testing.T) {
	const period = time.Second
	c := dial(t)
	p, err := cri.NewPoller(c, cri.PollerConfig{RelistPeriod: period})
	require.NoError(t, err)
	runLoops(t, p, nil)

	pod := runPod(t, c, "exit-poll")
	ids := startExiters(pod, 6)
	seen := collectExits(t, p, ids, 30*time.Second)
	for i, s := range seen {
		assert.Less(t, s.latency, period+500*time.Millisecond, "exit %d of %s", i, s.id)
	}
	summarise(t, "relist only", seen)
}

// Contract: removing a container and then its sandbox shows up as
// ContainerRemoved and SandboxRemoved.
func TestRemovalsSeen(t *testing.T) {
	parallel(t)
	c := dial(t)
	pod := runPod(t, c, "removals")
	ctrID := pod.start("sleeper", "sleep", "3600")
	p, err := cri.NewPoller(c, cri.PollerConfig{})
	require.NoError(t, err)
	sub := p.Subscribe()
	defer sub.Close()

	_, err = p.Relist(t.Context())
	require.NoError(t, err)
	sub.Next()

	require.NoError(t, c.StopContainer(t.Context(), ctrID, 0))
	require.NoError(t, c.RemoveContainer(t.Context(), ctrID))
	snap, err := p.Relist(t.Context())
	require.NoError(t, err)
	_, present := snap.Container(ctrID)
	assert.False(t, present)
	assert.Contains(t, typesFor(sub.Next().Events, ctrID), cri.ContainerRemoved)

	require.NoError(t, c.StopPodSandbox(t.Context(), pod.id))
	require.NoError(t, c.RemovePodSandbox(t.Context(), pod.id))
	snap, err = p.Relist(t.Context())
	require.NoError(t, err)
	_, present = snap.Sandbox(pod.id)
	assert.False(t, present)
	assert.Contains(t, typesFor(sub.Next().Events, pod.id), cri.SandboxRemoved)
}

// typesFor lists the event types concerning id (a container or a sandbox).
func typesFor(events []cri.Event, id string) []cri.EventType {
	var out []cri.EventType
	for _, e := range events {
		if (e.Container != nil && e.Container.ID == id) || (e.Container == nil && e.Sandbox.ID == id) {
			out = append(out, e.Type)
		}
	}
	return out
}
