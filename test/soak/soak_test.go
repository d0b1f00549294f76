//go:build soak

// Package soak runs cri-prober's engine for minutes against the fake CRI
// runtime with pods whose probe targets flap: readiness that comes and
// goes, liveness failures that stay below the threshold, liveness failures
// that last until the container is restarted, and containers that exit by
// themselves. It checks that every expected restart happens exactly once,
// that nothing else is restarted, and that goroutines, file descriptors
// and memory stay flat. `make soak` runs it for 10 minutes and writes the
// summary into docs/reliability.md; `make test` runs it for one minute.
package soak

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/spec"
	"github.com/cri-prober/cri-prober/test/harness"
)

var (
	duration   = flag.Duration("duration", time.Minute, "how long the targets flap")
	podCount   = flag.Int("pods", 200, "pods, one probed container each")
	warmup     = flag.Duration("warmup", 5*time.Second, "before the first resource sample (workers start within a period)")
	reportPath = flag.String("report", "", "update the soak section of this markdown file (docs/reliability.md)")
	heapPrefix = flag.String("heapprofile", "", "write heap profiles PREFIX.start.pb.gz and PREFIX.end.pb.gz (compare with go tool pprof -base)")
)

// The flapping periods. A blip fails one or two liveness probes (period
// 1 s, threshold 3): never a restart. A readiness flap fails readiness for
// three periods.
const (
	blipEvery  = 15 * time.Second
	blipLength = 1200 * time.Millisecond
	flapEvery  = 20 * time.Second
	flapLength = 3 * time.Second
	settle     = 30 * time.Second // after the flapping, for the last restarts
)

// plan is what a pod's targets do.
type plan struct {
	index     int
	kind      string        // http, grpc, exec or tcp (readiness; liveness over HTTP)
	readyFlap bool          // readiness fails flapLength every flapEvery
	blips     bool          // liveness fails blipLength every blipEvery
	sickAt    time.Duration // liveness fails from then until the container is stopped; 0: never
	exitAt    time.Duration // the container exits (code 1) then; 0: never
}

func (p plan) expectedRestarts() int {
	if p.sickAt > 0 || p.exitAt > 0 {
		return 1
	}
	return 0
}

func plans(n int, d time.Duration) []plan {
	kinds := []string{"http", "grpc", "exec", "tcp"}
	out := make([]plan, n)
	sick, exits := 0, 0
	for i := range out {
		kind := kinds[i%len(kinds)]
		// A TCP readiness probe has nothing to flap: its port accepts.
		out[i] = plan{index: i, kind: kind, readyFlap: i%5 == 0 && kind != "tcp", blips: i%10 == 2}
		switch i % 10 {
		case 1:
			sick++
		case 3:
			exits++
		}
	}
	// Spread the episodes over the middle of the run.
	s, e := 0, 0
	for i := range out {
		switch i % 10 {
		case 1:
			out[i].sickAt = d/10 + time.Duration(float64(d)*0.6*float64(s)/float64(max(1, sick)))
			s++
		case 3:
			out[i].exitAt = d/7 + time.Duration(float64(d)*0.6*float64(e)/float64(max(1, exits)))
			e++
		}
	}
	return out
}

// world holds the targets' state: time since the flapping started and
// which sick containers were stopped (cured).
type world struct {
	start time.Time
	plans []plan

	mu    sync.Mutex
	cured map[int]bool
}

func (w *world) since() time.Duration { return time.Since(w.start) }

func (w *world) live(i int) bool {
	p, t := w.plans[i], w.since()
	if p.blips && t%blipEvery >= blipEvery/3 && t%blipEvery < blipEvery/3+blipLength {
		return false
	}
	if p.sickAt > 0 && t >= p.sickAt {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.cured[i]
	}
	return true
}

func (w *world) ready(i int) bool {
	p, t := w.plans[i], w.since()
	return !p.readyFlap || t%flapEvery < flapEvery/2 || t%flapEvery >= flapEvery/2+flapLength
}

func (w *world) cure(i int) {
	w.mu.Lock()
	w.cured[i] = true
	w.mu.Unlock()
}

// podIP spreads pods over loopback addresses, so that a connection per
// probe does not exhaust one address pair's ephemeral ports.
func podIP(i int) string { return fmt.Sprintf("127.0.2.%d", 1+i%8) }

type ports struct{ http, grpc, tcp int }

// check answers a target's check: "<pod>/live" or "<pod>/ready".
func (w *world) check(name string) bool {
	pod, what, _ := strings.Cut(name, "/")
	i, err := strconv.Atoi(pod)
	if err != nil || i < 0 || i >= len(w.plans) {
		return false
	}
	if what == "live" {
		return w.live(i)
	}
	return w.ready(i)
}

type healthServer struct {
	healthpb.UnimplementedHealthServer
	w *world
}

func (h healthServer) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.w.check(req.GetService()) {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
}

func (h healthServer) Watch(*healthpb.HealthCheckRequest, healthpb.Health_WatchServer) error {
	return status.Error(codes.Unimplemented, "not used by probes")
}

func startTargets(t *testing.T, w *world) ports {
	t.Helper()
	hosts := make([]string, 8)
	for i := range hosts {
		hosts[i] = podIP(i)
	}
	listenAll := func(serve func(net.Listener)) int { return harness.ServeOnAll(t, hosts, serve) }
	httpPort := listenAll(func(l net.Listener) {
		http.Serve(l, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if w.check(strings.TrimPrefix(r.URL.Path, "/")) {
				rw.Write([]byte("ok"))
				return
			}
			http.Error(rw, "flapping", http.StatusServiceUnavailable)
		}))
	})
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, healthServer{w: w})
	t.Cleanup(srv.Stop)
	grpcPort := listenAll(func(l net.Listener) { srv.Serve(l) })
	tcpPort := listenAll(harness.AcceptAndClose)
	return ports{http: httpPort, grpc: grpcPort, tcp: tcpPort}
}

func probeJSON(p plan, what string, pt ports) string {
	check := strconv.Itoa(p.index) + "/" + what
	kind := p.kind
	if kind == "tcp" && what == "live" {
		kind = "http"
	}
	var handler string
	switch kind {
	case "http":
		handler = fmt.Sprintf(`"httpGet":{"port":%d,"path":"/%s"}`, pt.http, check)
	case "grpc":
		handler = fmt.Sprintf(`"grpc":{"port":%d,"service":%q}`, pt.grpc, check)
	case "exec":
		handler = fmt.Sprintf(`"exec":{"command":["check",%q]}`, check)
	case "tcp":
		handler = fmt.Sprintf(`"tcpSocket":{"port":%d}`, pt.tcp)
	}
	return fmt.Sprintf(`{%s,"periodSeconds":1,"failureThreshold":3}`, handler)
}

// tally counts events by pod and reason.
type tally struct {
	mu     sync.Mutex
	counts map[string]int // "pod reason"
}

func (c *tally) Record(e events.Event) {
	c.mu.Lock()
	c.counts[e.Pod+" "+e.Reason]++
	c.mu.Unlock()
}

func (c *tally) count(pod, reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[pod+" "+reason]
}

func (c *tally) total(reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.counts {
		if strings.HasSuffix(k, " "+reason) {
			n += v
		}
	}
	return n
}

// sample is the process's resources at one moment.
type sample struct {
	At         time.Duration
	Goroutines int
	FDs        int
	RSSMiB     float64
	HeapMiB    float64
}

func take(at time.Duration) sample {
	fds, _ := os.ReadDir("/proc/self/fd")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return sample{At: at, Goroutines: runtime.NumGoroutine(), FDs: len(fds), RSSMiB: harness.RSSMiB(), HeapMiB: float64(ms.HeapInuse) / (1 << 20)}
}

// floor samples ten times over two seconds, after a GC, and keeps each
// figure's minimum: probes in flight come and go, a leak raises the floor.
func floor(at time.Duration) sample {
	runtime.GC()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	low := take(at)
	for range 9 {
		<-tick.C
		s := take(at)
		low.Goroutines, low.FDs = min(low.Goroutines, s.Goroutines), min(low.FDs, s.FDs)
		low.RSSMiB, low.HeapMiB = min(low.RSSMiB, s.RSSMiB), min(low.HeapMiB, s.HeapMiB)
	}
	return low
}

// writeHeap writes a heap profile (after the GC of floor) if -heapprofile
// asks for them.
func writeHeap(t *testing.T, when string) {
	if *heapPrefix == "" {
		return
	}
	f, err := os.Create(*heapPrefix + "." + when + ".pb.gz")
	require.NoError(t, err)
	require.NoError(t, pprof.WriteHeapProfile(f))
	require.NoError(t, f.Close())
}

func podName(i int) string { return fmt.Sprintf("soak-%03d", i) }

func TestSoak(t *testing.T) {
	d := *duration
	w := &world{plans: plans(*podCount, d), cured: map[int]bool{}}
	pt := startTargets(t, w)
	rt := fakeruntime.NewForTest(t)
	rt.SetExecHandler(func(_ context.Context, _ string, cmd []string, _ time.Duration) (*runtimeapi.ExecSyncResponse, error) {
		if len(cmd) == 2 && w.check(cmd[1]) {
			return &runtimeapi.ExecSyncResponse{Stdout: []byte("ok")}, nil
		}
		return &runtimeapi.ExecSyncResponse{ExitCode: 1, Stdout: []byte("flapping")}, nil
	})
	initial := map[string]int{} // first container ID → pod
	sandboxes := make([]string, len(w.plans))
	for _, p := range w.plans {
		sandboxes[p.index] = rt.AddSandbox("soak", podName(p.index), "uid-"+podName(p.index), fakeruntime.WithIP(podIP(p.index)))
		id := rt.AddContainer(sandboxes[p.index], "app", runtimeapi.ContainerState_CONTAINER_RUNNING,
			fakeruntime.WithAnnotations(map[string]string{
				spec.LivenessAnnotation:  probeJSON(p, "live", pt),
				spec.ReadinessAnnotation: probeJSON(p, "ready", pt),
			}))
		initial[id] = p.index
	}
	var stopsMu sync.Mutex
	stops := map[string]int{} // container ID → StopContainer calls
	rt.OnStop(func(id string) {
		stopsMu.Lock()
		stops[id]++
		stopsMu.Unlock()
		if i, ok := initial[id]; ok && w.plans[i].sickAt > 0 {
			w.cure(i) // a restarted process is healthy again
		}
	})

	tally := &tally{counts: map[string]int{}}
	agent, err := harness.Start(rt.Endpoint(), harness.Options{Recorder: tally})
	require.NoError(t, err)
	defer agent.Stop()

	// A soak runs for wall-clock time by nature; the loop waits on its
	// ticker, exits are made at their planned moments.
	w.start = time.Now().Add(*warmup)
	<-time.After(*warmup)
	samples := []sample{floor(0)}
	writeHeap(t, "start")
	exitsDone := map[int]bool{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	sampleEvery := max(d/20, 5*time.Second)
	for w.since() < d {
		<-tick.C
		now := w.since()
		for _, p := range w.plans {
			if p.exitAt > 0 && now >= p.exitAt && !exitsDone[p.index] {
				exitsDone[p.index] = true
				for id, i := range initial {
					if i == p.index {
						require.NoError(t, rt.SetContainerState(id, runtimeapi.ContainerState_CONTAINER_EXITED, 1))
					}
				}
			}
		}
		if now-samples[len(samples)-1].At >= sampleEvery {
			samples = append(samples, floor(now))
		}
	}

	// The flapping is over: wait for the last restarts and readiness.
	deadline := time.Now().Add(settle)
	var problems []string
	for {
		problems = check(w, rt, sandboxes, agent)
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		<-tick.C
	}
	assert.Empty(t, problems, "pods not in their expected state")
	samples = append(samples, floor(w.since()))
	writeHeap(t, "end")

	stopsMu.Lock()
	for id, n := range stops {
		i, ok := initial[id]
		switch {
		case !ok:
			t.Errorf("unexpected StopContainer of %s (a replacement)", id)
		case w.plans[i].sickAt == 0:
			t.Errorf("%s: stopped %d times, never sick", podName(i), n)
		case n != 1:
			t.Errorf("%s: stopped %d times, want once", podName(i), n)
		}
	}
	stopsMu.Unlock()
	var expected, kills, flapped, blipped, flapPods, blipPods int
	for _, p := range w.plans {
		expected += p.expectedRestarts()
		if p.sickAt > 0 {
			kills++
		}
		if p.readyFlap {
			flapPods++
			if tally.count(podName(p.index), "Unhealthy") > 0 {
				flapped++
			}
		}
		if p.blips {
			blipPods++
			if tally.count(podName(p.index), "Unhealthy") > 0 {
				blipped++
			}
		}
	}
	assert.Equal(t, flapPods, flapped, "every readiness-flapping pod was seen failing (the test flaps for real)")
	assert.Equal(t, blipPods, blipped, "every blipping pod was seen failing below its threshold")
	started := tally.total(restart.ReasonStarted)
	assert.Equal(t, expected, started, "restarts done")
	assert.Equal(t, kills, tally.total(restart.ReasonKilling), "liveness kills")

	first, last := samples[0], samples[len(samples)-1]
	peak := first
	for _, s := range samples {
		peak.Goroutines, peak.FDs = max(peak.Goroutines, s.Goroutines), max(peak.FDs, s.FDs)
		peak.RSSMiB, peak.HeapMiB = max(peak.RSSMiB, s.RSSMiB), max(peak.HeapMiB, s.HeapMiB)
	}
	// Workers are replaced on restart and probes run briefly: small
	// changes are noise; growth with time is a leak.
	assert.LessOrEqual(t, last.Goroutines, first.Goroutines+20, "goroutines flat")
	assert.LessOrEqual(t, last.FDs, first.FDs+20, "file descriptors flat")
	assert.LessOrEqual(t, last.RSSMiB, first.RSSMiB*1.3+10, "RSS flat")
	assert.LessOrEqual(t, last.HeapMiB, first.HeapMiB*1.3+5, "heap flat")

	probes, err := harness.CounterSum(agent.ProbeRegistry, "prober_probe_total")
	require.NoError(t, err)
	sum := summary{Pods: len(w.plans), Duration: d, Probes: int(probes), ExpectedRestarts: expected, Restarts: started,
		Kills: kills, SeenKills: tally.total(restart.ReasonKilling), FlapPods: flapPods, Flapped: flapped, BlipPods: blipPods, Blipped: blipped, Problems: problems, Samples: samples, Peak: peak,
		Failed: t.Failed(), Procs: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU()}
	t.Log(sum.markdown())
	if *reportPath != "" {
		require.NoError(t, sum.write(*reportPath))
	}
}

// check returns what is not yet as planned: per pod one running instance,
// whose attempt is the number of restarts expected, and ready.
func check(w *world, rt *fakeruntime.Runtime, sandboxes []string, agent *harness.Agent) []string {
	ready := map[string]bool{}
	for _, p := range agent.Report() {
		ready[p.Name] = p.Ready
	}
	var problems []string
	for _, p := range w.plans {
		var running []fakeruntime.ContainerInfo
		for _, c := range rt.Containers(sandboxes[p.index]) {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				running = append(running, c)
			}
		}
		name := podName(p.index)
		switch {
		case len(running) != 1:
			problems = append(problems, fmt.Sprintf("%s: %d instances running", name, len(running)))
		case int(running[0].Attempt) != p.expectedRestarts():
			problems = append(problems, fmt.Sprintf("%s: attempt %d running, want %d", name, running[0].Attempt, p.expectedRestarts()))
		case !ready[name]:
			problems = append(problems, name+": not ready")
		}
	}
	return problems
}
