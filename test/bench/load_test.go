//go:build bench

// Package bench is cri-prober's load harness: the real poller, probe
// manager and restarter against the in-process fake CRI runtime at node
// scale, with loopback HTTP, TCP and gRPC targets and exec probes answered
// by the fake. `make bench` runs it and writes docs/performance.md.
package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/probe"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
	"github.com/cri-prober/cri-prober/test/harness"
)

var (
	sizes      = flag.String("sizes", "100,1000,10000", "container counts to measure")
	warmup     = flag.Duration("warmup", 4*time.Second, "run before measuring (workers start within one period)")
	window     = flag.Duration("window", 10*time.Second, "measured steady state per size")
	reportPath = flag.String("report", "", "write the markdown report here")
	plotPath   = flag.String("plot", "", "write the PNG plot here")
	benchFile  = flag.String("benchmarks", "", "go test -bench output to include in the report")
	kind       = flag.String("kind", "", "probe one kind only (http, tcp, grpc or exec) to find which one a figure comes from")
	loadRuns   = flag.Int("runs", 1, "measure each size this many times (the report shows the spread)")
)

// kills is how many containers fail their liveness probe mid-window, to
// time threshold reached → StopContainer.
const kills = 20

// Result is one size's figures.
type Result struct {
	Containers         int
	ProbesPerSecond    float64
	LatenessP50Ms      float64
	LatenessP99Ms      float64
	LatenessMaxMs      float64
	CPUPer1000Probes   float64 // CPU seconds (agent, fake runtime and targets together)
	RSSMiB             float64
	GoHeapMiB          float64
	Goroutines         int
	RSSKiBPerProbe     float64
	GoroutinesPerProbe float64
	CRICallsPerSecond  map[string]float64
	StopP50Ms          float64
	StopP99Ms          float64
	StopMaxMs          float64
	Procs              int // GOMAXPROCS
}

// TestLoad runs each size in its own process (so that RSS is that size's)
// and writes the report.
func TestLoad(t *testing.T) {
	if os.Getenv("CRI_PROBER_LOAD_SIZE") != "" {
		t.Skip("child process")
	}
	var all []Result
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		require.NoError(t, err)
		ns = append(ns, n)
	}
	for i := range *loadRuns * len(ns) {
		n := ns[i%len(ns)] // the sizes in turn, so that drift hits each alike
		cmd := exec.Command(os.Args[0], "-test.run", "^TestLoadOne$", "-test.v", "-warmup", warmup.String(), "-window", window.String())
		cmd.Env = append(os.Environ(), "CRI_PROBER_LOAD_SIZE="+strconv.Itoa(n), "CRI_PROBER_LOAD_KIND="+*kind)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		var r Result
		found := false
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			if js, ok := strings.CutPrefix(sc.Text(), "RESULT "); ok {
				require.NoError(t, json.Unmarshal([]byte(js), &r))
				found = true
			}
		}
		require.True(t, found, string(out))
		t.Logf("%d containers: %+v", n, r)
		all = append(all, r)
	}
	slices.SortStableFunc(all, func(a, b Result) int { return a.Containers - b.Containers })
	if *reportPath != "" {
		require.NoError(t, writeReport(*reportPath, *plotPath, *benchFile, all))
	}
	if *plotPath != "" {
		require.NoError(t, writePlot(*plotPath, all))
	}
}

// TestLoadOne measures one size; TestLoad runs it in a child process.
func TestLoadOne(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("CRI_PROBER_LOAD_SIZE"))
	if err != nil {
		t.Skip("run through TestLoad")
	}
	r := measure(t, n)
	t.Logf("%+v", r)
	js, err := json.Marshal(r)
	require.NoError(t, err)
	fmt.Println("RESULT " + string(js))
}

type targets struct {
	httpPort, tcpPort, grpcPort int
}

// podIPs spreads the pods over this many loopback addresses: a new
// connection per probe (kubelet's way) at 10,000 probes per second would
// otherwise run one address pair out of ephemeral ports within seconds, and
// the harness would measure the kernel's port search.
const podIPs = 32

func podIP(p int) string { return fmt.Sprintf("127.0.1.%d", 1+p%podIPs) }

// startTargets serves HTTP, TCP and gRPC on one port per kind, bound on
// every pod address.
func startTargets(t *testing.T) targets {
	t.Helper()
	hosts := make([]string, podIPs)
	for i := range hosts {
		hosts[i] = podIP(i)
	}
	listenAll := func(serve func(net.Listener)) int { return harness.ServeOnAll(t, hosts, serve) }
	httpPort := listenAll(func(l net.Listener) {
		http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	})
	tcpPort := listenAll(harness.AcceptAndClose)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	t.Cleanup(srv.Stop)
	grpcPort := listenAll(func(l net.Listener) { srv.Serve(l) })
	return targets{httpPort: httpPort, tcpPort: tcpPort, grpcPort: grpcPort}
}

// probeFor mixes the kinds: 4 in 10 HTTP, 3 TCP, 2 gRPC, 1 exec (unless
// -kind asks for one).
func probeFor(i int, tg targets) string {
	switch os.Getenv("CRI_PROBER_LOAD_KIND") {
	case "http":
		i = 0
	case "tcp":
		i = 4
	case "grpc":
		i = 7
	case "exec":
		i = 9
	}
	switch i % 10 {
	case 0, 1, 2, 3:
		return fmt.Sprintf(`{"httpGet":{"port":%d,"path":"/healthz"},"periodSeconds":1}`, tg.httpPort)
	case 4, 5, 6:
		return fmt.Sprintf(`{"tcpSocket":{"port":%d},"periodSeconds":1}`, tg.tcpPort)
	case 7, 8:
		return fmt.Sprintf(`{"grpc":{"port":%d},"periodSeconds":1}`, tg.grpcPort)
	default:
		return `{"exec":{"command":["check"]},"periodSeconds":1}`
	}
}

// lateness collects exact samples.
type lateness struct {
	mu      sync.Mutex
	on      bool
	samples []float64
}

func (l *lateness) Observe(v float64) {
	l.mu.Lock()
	if l.on {
		l.samples = append(l.samples, v)
	}
	l.mu.Unlock()
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return -1 // JSON has no NaN; the report prints "none"
	}
	return sorted[min(len(sorted)-1, int(math.Ceil(p*float64(len(sorted))))-1)]
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func sumCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	total, err := harness.CounterSum(reg, name)
	require.NoError(t, err)
	return total
}

func measure(t *testing.T, n int) Result {
	if os.Getenv("GOMAXPROCS") == "" { // as cri-prober run does
		runtime.GOMAXPROCS(probe.Procs(runtime.GOMAXPROCS(0)))
	}
	tg := startTargets(t)
	rt := fakeruntime.NewForTest(t)
	var failingMu sync.Mutex
	failing := map[string]bool{}
	rt.SetExecHandler(func(_ context.Context, id string, cmd []string, _ time.Duration) (*runtimeapi.ExecSyncResponse, error) {
		failingMu.Lock()
		fail := failing[id]
		failingMu.Unlock()
		if fail {
			return &runtimeapi.ExecSyncResponse{ExitCode: 1, Stdout: []byte("sick")}, nil
		}
		return &runtimeapi.ExecSyncResponse{Stdout: []byte("ok")}, nil
	})
	for p := range n / 10 {
		sb := rt.AddSandbox("load", fmt.Sprintf("pod-%05d", p), fmt.Sprintf("uid-%05d", p), fakeruntime.WithIP(podIP(p)))
		for c := range 10 {
			rt.AddContainer(sb, fmt.Sprintf("c%d", c), runtimeapi.ContainerState_CONTAINER_RUNNING,
				fakeruntime.WithAnnotations(map[string]string{spec.ReadinessAnnotation: probeFor(p*10+c, tg)}))
		}
	}
	var victims []string
	for k := range kills {
		sb := rt.AddSandbox("kill", fmt.Sprintf("victim-%02d", k), fmt.Sprintf("victim-%02d", k))
		victims = append(victims, rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING,
			fakeruntime.WithAnnotations(map[string]string{spec.LivenessAnnotation: `{"exec":{"command":["live"]},"periodSeconds":1,"failureThreshold":1}`})))
	}

	late := &lateness{}
	agent, err := harness.Start(rt.Endpoint(), harness.Options{Lateness: late})
	require.NoError(t, err)
	defer agent.Stop()
	probeReg, store := agent.ProbeRegistry, agent.Store

	// threshold reached → StopContainer issued, for the victims.
	var stopMu sync.Mutex
	failedAt, stoppedAt := map[string]time.Time{}, map[string]time.Time{}
	rt.OnStop(func(id string) {
		stopMu.Lock()
		stoppedAt[id] = time.Now()
		stopMu.Unlock()
	})
	updates := store.Subscribe()
	defer updates.Close()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-updates.Ready():
				now := time.Now()
				for _, u := range updates.Next() {
					if u.Type == results.Liveness && u.Result == results.Failure {
						stopMu.Lock()
						failedAt[u.ContainerID] = now
						stopMu.Unlock()
					}
				}
			}
		}
	})
	defer func() {
		cancel()
		wg.Wait()
	}()

	// A load test measures over a wall-clock window by nature.
	<-time.After(*warmup)
	rt.ResetCalls()
	late.mu.Lock()
	late.on, late.samples = true, nil
	late.mu.Unlock()
	probes0, cpu0, start := sumCounter(t, probeReg, "prober_probe_total"), cpuSeconds(), time.Now()

	<-time.After(*window / 2)
	// Steady-state CRI calls are counted before the victims start failing:
	// restarts add their own Stop/Create/Start and relists.
	steady := time.Since(start).Seconds()
	calls := map[string]float64{}
	for method, c := range rt.CallCounts() {
		calls[method] = float64(c) / steady
	}
	failingMu.Lock()
	for _, id := range victims {
		failing[id] = true
	}
	failingMu.Unlock()
	<-time.After(*window / 2)

	elapsed := time.Since(start).Seconds()
	cpu := cpuSeconds() - cpu0
	probes := sumCounter(t, probeReg, "prober_probe_total") - probes0
	late.mu.Lock()
	samples := slices.Clone(late.samples)
	late.on = false
	late.mu.Unlock()
	slices.Sort(samples)
	var stops []float64
	stopMu.Lock()
	for id, f := range failedAt {
		if s, ok := stoppedAt[id]; ok {
			stops = append(stops, s.Sub(f).Seconds())
		}
	}
	stopMu.Unlock()
	slices.Sort(stops)
	if path := os.Getenv("CRI_PROBER_LOAD_HEAPPROFILE"); path != "" {
		// While everything still runs: what a probe's memory is made of.
		f, err := os.Create(path)
		require.NoError(t, err)
		require.NoError(t, pprof.WriteHeapProfile(f))
		require.NoError(t, f.Close())
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	total := float64(n + kills)
	return Result{
		Containers:         n,
		ProbesPerSecond:    probes / elapsed,
		LatenessP50Ms:      1000 * percentile(samples, 0.50),
		LatenessP99Ms:      1000 * percentile(samples, 0.99),
		LatenessMaxMs:      1000 * percentile(samples, 1),
		CPUPer1000Probes:   1000 * cpu / probes,
		RSSMiB:             harness.RSSMiB(),
		GoHeapMiB:          float64(ms.HeapInuse) / (1 << 20),
		Goroutines:         runtime.NumGoroutine(),
		RSSKiBPerProbe:     harness.RSSMiB() * 1024 / total,
		GoroutinesPerProbe: float64(runtime.NumGoroutine()) / total,
		CRICallsPerSecond:  calls,
		StopP50Ms:          1000 * percentile(stops, 0.50),
		StopP99Ms:          1000 * percentile(stops, 0.99),
		StopMaxMs:          1000 * percentile(stops, 1),
		Procs:              runtime.GOMAXPROCS(0),
	}
}
