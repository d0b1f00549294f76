//go:build bench

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/probe"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
	"github.com/cri-prober/cri-prober/test/harness"
)

// The node benchmarks (issue 15): density, overload and cost per probe
// against a bare loop of the same work. Each case runs the agent in a child
// process of its own (TestNodeChild), so that its CPU and memory are the
// agent's alone; the targets (HTTP, TCP and gRPC servers) and the fake CRI
// runtime stay in this process, at nice 10, as a node's workloads under the
// CPU its daemons reserve. Where a case has a bare loop, the loop runs in a
// child process too, at the same priority and GOMAXPROCS as the agent,
// against the same targets, just before the agent.
//
// Sizes and durations come from the environment (BENCH_* below) so that a
// quick run proves the harness and `make bench` runs the sizes; the
// figures are reported, never asserted: only the harness's own checks fail
// the test (every planned kill happened, every child answered).

var (
	nodeReport = flag.String("node-report", "", "write the node section of this markdown file (TestNode)")
	nodeJSON   = flag.String("node-json", "", "also write the node results as JSON here")
)

// envInt, envDur and envStr read a BENCH_* setting.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envDur(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envStr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// nodeSettings are the sizes of a TestNode run.
type nodeSettings struct {
	Runs          int           // BENCH_RUNS: each case this many times
	Cases         string        // BENCH_NODE_CASES: density,overload,floor
	DensitySizes  []int         // BENCH_DENSITY_SIZES: configured probes (0 = the baseline)
	DensityPeriod int           // BENCH_DENSITY_PERIOD: seconds
	DensityWarmup time.Duration // BENCH_DENSITY_WARMUP: at least one period (workers start within one)
	DensityWindow time.Duration // BENCH_DENSITY_WINDOW
	ProbeMetrics  []string      // BENCH_PROBE_METRICS: per-probe series modes to run density with
	OverProbes    int           // BENCH_OVERLOAD_PROBES at period 1 s
	OverWarmup    time.Duration // BENCH_OVERLOAD_WARMUP
	OverWindow    time.Duration // BENCH_OVERLOAD_WINDOW (and the bare loop's)
	BareWorkers   int           // BENCH_BARE_WORKERS: the overload bare loop's goroutines (the agent's probes in flight)
	FloorRate     int           // BENCH_FLOOR_RATE: probes (and bare ops) per second
	FloorWarmup   time.Duration // BENCH_FLOOR_WARMUP
	FloorWindow   time.Duration // BENCH_FLOOR_WINDOW
	Victims       int           // BENCH_VICTIMS: containers whose liveness starts failing mid-window
}

func readNodeSettings() nodeSettings {
	s := nodeSettings{
		Runs:          envInt("BENCH_RUNS", 3),
		Cases:         envStr("BENCH_NODE_CASES", "density,overload,floor"),
		DensityPeriod: envInt("BENCH_DENSITY_PERIOD", 10),
		OverProbes:    envInt("BENCH_OVERLOAD_PROBES", 10000),
		OverWarmup:    envDur("BENCH_OVERLOAD_WARMUP", 3*time.Second),
		OverWindow:    envDur("BENCH_OVERLOAD_WINDOW", 8*time.Second),
		BareWorkers:   envInt("BENCH_BARE_WORKERS", prober.DefaultMaxProbesInFlight),
		FloorRate:     envInt("BENCH_FLOOR_RATE", 1000),
		FloorWarmup:   envDur("BENCH_FLOOR_WARMUP", 2*time.Second),
		FloorWindow:   envDur("BENCH_FLOOR_WINDOW", 5*time.Second),
		Victims:       envInt("BENCH_VICTIMS", 10),
	}
	s.DensityWarmup = envDur("BENCH_DENSITY_WARMUP", time.Duration(s.DensityPeriod)*time.Second+time.Second)
	s.DensityWindow = envDur("BENCH_DENSITY_WINDOW", 2*time.Duration(s.DensityPeriod)*time.Second)
	for _, f := range strings.Split(envStr("BENCH_DENSITY_SIZES", "0,10000"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			s.DensitySizes = append(s.DensitySizes, n)
		}
	}
	s.ProbeMetrics = strings.Split(envStr("BENCH_PROBE_METRICS", "per-probe,aggregate"), ",")
	return s
}

// caseSpec is one measured case.
type caseSpec struct {
	Name   string   // density, overload, floor-tcp, floor-http
	Probes int      // configured probes, victims not counted
	Period int      // seconds
	Mix    []string // probe kinds, cycled over the probes
	// Victims are extra containers whose HTTP liveness probe (period
	// VictimPeriod, failureThreshold from VictimFT, cycled) starts failing
	// at the middle of the window.
	Victims      int
	VictimFT     []int
	VictimPeriod int
	Warmup       time.Duration
	Window       time.Duration
	ProbeMetrics string
	// Bare, when set, runs the bare loop of the same mix first.
	Bare *bareSpec
}

// bareSpec is a bare loop: Workers goroutines doing the mix's work, as
// fast as they can (Rate 0) or at Rate operations per second.
type bareSpec struct {
	Workers int
	Rate    int
	Window  time.Duration
}

// The load mix of the density case: 4 in 10 HTTP, 3 TCP, 2 gRPC, 1 exec.
var densityMix = []string{"http", "http", "http", "http", "tcp", "tcp", "tcp", "grpc", "grpc", "exec"}

// The overload mix: TCP and HTTP, half each.
var overloadMix = []string{"tcp", "http"}

// NodeResult is one run of one case.
type NodeResult struct {
	Case         string
	Run          int
	Probes       int
	Period       int
	Mix          string
	ProbeMetrics string
	Agent        AgentRun
	Bare         *BareRun `json:",omitempty"`
	// CRICallsPerSecond are counted by the fake runtime over the first
	// half of the window, before any victim fails.
	CRICallsPerSecond map[string]float64
	// HTTPRuns are the runs of each HTTP probe over the window, as the
	// targets counted them: in -node-json only, as the targets run at nice
	// 10 and, on a busy machine, count late (their spread is wider than the
	// agent's own history shows).
	HTTPRuns []float64
	Victims  []VictimResult
	// Spurious counts victims killed before they were made to fail (the
	// agent's own lateness timing them out).
	Spurious int
	Missed   int
}

// VictimResult is one planned kill.
type VictimResult struct {
	FailureThreshold int
	PeriodSeconds    int
	ThresholdStopMs  float64 // the agent's result turned Failure → StopContainer
	FirstFailStopMs  float64 // the target's first failing answer → StopContainer
}

// AgentRun is what the agent's process measured over the window.
type AgentRun struct {
	Procs         int
	Probes        float64
	Seconds       float64
	CPUSeconds    float64
	LatenessP50Ms float64
	LatenessP99Ms float64
	LatenessMaxMs float64
	RSSMeanMiB    float64
	RSSPeakMiB    float64
	HeapPeakMiB   float64
	LiveHeapMiB   float64 // after a GC at the window's end
	Goroutines    int
	// Runs are each probe's runs over the window, from its history (nil
	// when the window is longer than the history keeps).
	Runs []float64
	// LivenessFailures are when each container's liveness result turned
	// Failure (Unix nanoseconds).
	LivenessFailures map[string]int64
	// VictimFailures are the outputs of the victims' failed liveness
	// probes, with when they ran (Unix nanoseconds): why each victim was
	// killed.
	VictimFailures []VictimFailure `json:",omitempty"`
}

// VictimFailure is one failed liveness probe of a victim.
type VictimFailure struct {
	Pod    string
	At     int64
	Output string
}

// BareRun is what a bare loop's process measured.
type BareRun struct {
	Procs      int
	Workers    int
	Ops        map[string]float64 // successful operations by kind
	Errors     float64
	Seconds    float64
	CPUSeconds float64
	RSSPeakMiB float64
}

// envNodeChild names the file of a child's childConfig.
const envNodeChild = "CRI_PROBER_NODE_CHILD"

// bareSettle is the pause before a bare loop.
const bareSettle = 3 * time.Second

// floorWorkers are the paced bare loop's goroutines: enough that the pace,
// not they, sets the rate.
const floorWorkers = 64

// childConfig is what a child process is told, as JSON in the file
// envNodeChild names.
type childConfig struct {
	Mode         string // agent or bare
	Endpoint     string
	Warmup       time.Duration
	Window       time.Duration
	ProbeMetrics string
	Bare         bareSpec
	Targets      []bareTarget
}

type bareTarget struct {
	Kind, Addr, Path string
}

// TestNode runs the node cases BENCH_RUNS times each and writes the node
// section of docs/performance.md and its plot.
func TestNode(t *testing.T) {
	if os.Getenv(envNodeChild) != "" {
		t.Skip("child process")
	}
	s := readNodeSettings()
	require.NoError(t, niceAllThreads(10))
	tg := startNodeTargets(t, max(s.OverProbes, slices.Max(append(s.DensitySizes, 1)), s.FloorRate))
	require.NoError(t, niceAllThreads(10)) // the servers' threads too
	has := func(name string) bool { return slices.Contains(strings.Split(s.Cases, ","), name) }

	var all []NodeResult
	for run := range s.Runs {
		var cases []caseSpec
		if has("density") {
			for mi, mode := range s.ProbeMetrics {
				for _, n := range s.DensitySizes {
					if n == 0 && mi > 0 {
						continue // one baseline: with no probe, no series either way
					}
					c := caseSpec{Name: "density", Probes: n, Period: s.DensityPeriod, Mix: densityMix,
						Warmup: s.DensityWarmup, Window: s.DensityWindow, ProbeMetrics: mode}
					if n == 0 { // the baseline: nothing to wait for
						c.Warmup, c.Window = 2*time.Second, 4*time.Second
					} else {
						c.Victims, c.VictimFT, c.VictimPeriod = s.Victims, []int{1}, s.DensityPeriod
					}
					cases = append(cases, c)
				}
			}
		}
		if has("floor") {
			for _, k := range []string{"tcp", "http"} {
				cases = append(cases, caseSpec{Name: "floor-" + k, Probes: s.FloorRate, Period: 1, Mix: []string{k},
					Warmup: s.FloorWarmup, Window: s.FloorWindow,
					Bare: &bareSpec{Workers: floorWorkers, Rate: s.FloorRate, Window: s.FloorWindow}})
			}
		}
		if has("overload") {
			cases = append(cases, caseSpec{Name: "overload", Probes: s.OverProbes, Period: 1, Mix: overloadMix,
				Victims: s.Victims, VictimFT: []int{1, 3}, VictimPeriod: 1, Warmup: s.OverWarmup, Window: s.OverWindow,
				Bare: &bareSpec{Workers: s.BareWorkers, Window: s.OverWindow}})
		}
		for _, c := range cases {
			r := runCase(t, tg, c)
			r.Run = run + 1
			t.Logf("%s (%d probes, %s, run %d): %s", c.Name, c.Probes, c.ProbeMetrics, run+1, summary(r))
			all = append(all, r)
		}
	}
	if *nodeJSON != "" {
		js, err := json.MarshalIndent(all, "", " ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(*nodeJSON, js, 0o644))
	}
	if *nodeReport != "" {
		plots := strings.TrimSuffix(*nodeReport, ".md") + "-node.png"
		require.NoError(t, writeNodePlot(plots, s, all))
		require.NoError(t, writeSection(*nodeReport, "node", "## Node targets (issue 15)", nodeMarkdown(s, all, filepath.Base(plots))))
	}
	for _, r := range all {
		if r.Missed > 0 {
			t.Errorf("%s run %d: %d planned kills did not happen", r.Case, r.Run, r.Missed)
		}
	}
}

func summary(r NodeResult) string {
	a := r.Agent
	s := fmt.Sprintf("%.0f probes/s, lateness p99 %s, RSS %.1f MiB (peak %.1f), live heap %.1f MiB, CPU %.0f µs/probe",
		a.Probes/max(a.Seconds, 1e-9), ms(a.LatenessP99Ms), a.RSSMeanMiB, a.RSSPeakMiB, a.LiveHeapMiB, 1e6*a.CPUSeconds/max(a.Probes, 1))
	if b := r.Bare; b != nil {
		s += fmt.Sprintf("; bare loop %.0f ops/s, %.0f µs/op, %.0f errors", sumOps(b)/b.Seconds, 1e6*b.CPUSeconds/max(sumOps(b), 1), b.Errors)
	}
	return s
}

func sumOps(b *BareRun) float64 {
	var n float64
	for _, v := range b.Ops {
		n += v
	}
	return n
}

// niceAllThreads sets the nice value of every thread of this process
// (Linux's nice is a thread's, and threads made later inherit their
// maker's). Lowering it needs root; then the error says so.
func niceAllThreads(nice int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("nice %d: %w", nice, err)
		}
	}
	return nil
}

// nodeTargets are the parent's servers: HTTP (counting each path /p/N),
// TCP, gRPC on every pod address, and the victims' HTTP server.
type nodeTargets struct {
	httpPort, tcpPort, grpcPort, victimPort int
	httpRuns                                []atomic.Int64
	victims                                 *victimState
}

const victimIP = "127.0.3.1"

func startNodeTargets(t *testing.T, maxProbes int) *nodeTargets {
	hosts := make([]string, podIPs)
	for i := range hosts {
		hosts[i] = podIP(i)
	}
	tg := &nodeTargets{httpRuns: make([]atomic.Int64, maxProbes), victims: &victimState{}}
	tg.httpPort = harness.ServeOnAll(t, hosts, func(l net.Listener) {
		http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/")); err == nil && n >= 0 && n < len(tg.httpRuns) {
				tg.httpRuns[n].Add(1)
			}
			w.Write([]byte("ok"))
		}))
	})
	tg.tcpPort = harness.ServeOnAll(t, hosts, harness.AcceptAndClose)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	t.Cleanup(srv.Stop)
	tg.grpcPort = harness.ServeOnAll(t, hosts, func(l net.Listener) { srv.Serve(l) })
	tg.victimPort = harness.ServeOnAll(t, []string{victimIP}, func(l net.Listener) {
		http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/victim/"))
			if err != nil || !tg.victims.failing(k) {
				w.Write([]byte("ok"))
				return
			}
			http.Error(w, "sick", http.StatusInternalServerError)
		}))
	})
	return tg
}

// victimState is which victims answer with failures, since when, and when
// each was stopped.
type victimState struct {
	mu        sync.Mutex
	flipped   time.Time
	fail      []bool
	firstFail []time.Time
	stopped   []time.Time
	ofID      map[string]int // container ID → victim
	sandboxes []string
	spurious  int
}

func (v *victimState) reset(sandboxes []string, ids []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := len(sandboxes)
	v.flipped, v.fail, v.firstFail, v.stopped = time.Time{}, make([]bool, n), make([]time.Time, n), make([]time.Time, n)
	v.sandboxes, v.ofID, v.spurious = sandboxes, map[string]int{}, 0
	for k, id := range ids {
		v.ofID[id] = k
	}
}

func (v *victimState) failing(k int) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k < 0 || k >= len(v.fail) || !v.fail[k] {
		return false
	}
	if v.firstFail[k].IsZero() {
		v.firstFail[k] = time.Now()
	}
	return true
}

func (v *victimState) flip() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.flipped = time.Now()
	for k := range v.fail {
		v.fail[k] = true
	}
}

// stop records a StopContainer of id; the victim answers healthily again
// (its re-created container is not to be killed again).
func (v *victimState) stop(rt *fakeruntime.Runtime, id string, at time.Time) {
	v.mu.Lock()
	k, ok := v.ofID[id]
	sandboxes := v.sandboxes
	v.mu.Unlock()
	if !ok { // a re-created container: learn the victims' current IDs
		learned := map[string]int{}
		for k, sb := range sandboxes {
			for _, c := range rt.Containers(sb) {
				learned[c.ID] = k
			}
		}
		v.mu.Lock()
		for id, k := range learned {
			v.ofID[id] = k
		}
		k, ok = v.ofID[id]
		v.mu.Unlock()
		if !ok {
			return
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.flipped.IsZero():
		v.spurious++
	case v.fail[k] && v.stopped[k].IsZero():
		v.stopped[k] = at
		v.fail[k] = false
	}
}

func (v *victimState) allStopped() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range v.stopped {
		if s.IsZero() {
			return false
		}
	}
	return true
}

func (tg *nodeTargets) probeJSON(kind string, i, period int) (string, bareTarget) {
	ip := podIP(i / 10)
	switch kind {
	case "http":
		path := fmt.Sprintf("/p/%d", i)
		return fmt.Sprintf(`{"httpGet":{"port":%d,"path":%q},"periodSeconds":%d,"timeoutSeconds":1}`, tg.httpPort, path, period),
			bareTarget{Kind: kind, Addr: net.JoinHostPort(ip, strconv.Itoa(tg.httpPort)), Path: path}
	case "tcp":
		return fmt.Sprintf(`{"tcpSocket":{"port":%d},"periodSeconds":%d,"timeoutSeconds":1}`, tg.tcpPort, period),
			bareTarget{Kind: kind, Addr: net.JoinHostPort(ip, strconv.Itoa(tg.tcpPort))}
	case "grpc":
		return fmt.Sprintf(`{"grpc":{"port":%d},"periodSeconds":%d,"timeoutSeconds":1}`, tg.grpcPort, period), bareTarget{Kind: kind}
	default:
		return fmt.Sprintf(`{"exec":{"command":["check"]},"periodSeconds":%d,"timeoutSeconds":1}`, period), bareTarget{Kind: kind}
	}
}

// runCase runs a case's bare loop (if any), then the agent against a fresh
// fake runtime holding the case's containers.
// timeWaitSockets is how many TCP sockets the machine holds in TIME_WAIT
// (/proc/net/sockstat), -1 if it cannot tell.
func timeWaitSockets() int {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[0] == "TCP:" && f[i] == "tw" {
				n, err := strconv.Atoi(f[i+1])
				if err != nil {
					return -1
				}
				return n
			}
		}
	}
	return -1
}

// drainTimeWait waits (up to TIME_WAIT's 60 s, and a little) until the
// sockets the previous case closed have left TIME_WAIT: every probe closes
// its connection (kubelet's SO_LINGER), so thousands a second leave tens
// of thousands behind, and a case run on their heels finds the ephemeral
// ports toward its targets taken (EADDRNOTAVAIL) and measures that.
func drainTimeWait(t *testing.T) {
	const few = 10000
	deadline := time.Now().Add(70 * time.Second)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for n := timeWaitSockets(); n > few && time.Now().Before(deadline); n = timeWaitSockets() {
		<-tick.C
	}
	if n := timeWaitSockets(); n > few {
		t.Logf("still %d sockets in TIME_WAIT after 70 s", n)
	}
}

func runCase(t *testing.T, tg *nodeTargets, c caseSpec) NodeResult {
	// Every case starts clean: after an overload case, a density case's
	// victims found their targets' connections failing and were killed
	// before they were made to fail.
	drainTimeWait(t)
	r := NodeResult{Case: c.Name, Probes: c.Probes, Period: c.Period, Mix: strings.Join(slices.Compact(slices.Clone(c.Mix)), "+"),
		ProbeMetrics: c.ProbeMetrics}
	var bareTargets []bareTarget
	dir, err := os.MkdirTemp("", "nodebench")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	rt := fakeruntime.New()
	require.NoError(t, rt.Start(filepath.Join(dir, "cri.sock")))
	defer rt.Stop()
	rt.SetExecHandler(func(context.Context, string, []string, time.Duration) (*runtimeapi.ExecSyncResponse, error) {
		return &runtimeapi.ExecSyncResponse{Stdout: []byte("ok")}, nil
	})
	for p := 0; p*10 < c.Probes; p++ {
		sb := rt.AddSandbox("load", fmt.Sprintf("pod-%05d", p), fmt.Sprintf("uid-%05d", p), fakeruntime.WithIP(podIP(p)))
		for ci := 0; ci < 10 && p*10+ci < c.Probes; ci++ {
			i := p*10 + ci
			js, bt := tg.probeJSON(c.Mix[i%len(c.Mix)], i, c.Period)
			bareTargets = append(bareTargets, bt)
			rt.AddContainer(sb, fmt.Sprintf("c%d", ci), runtimeapi.ContainerState_CONTAINER_RUNNING,
				fakeruntime.WithAnnotations(map[string]string{spec.ReadinessAnnotation: js}))
		}
	}
	var sandboxes, ids []string
	var fts []int
	for k := range c.Victims {
		ft := c.VictimFT[k%len(c.VictimFT)]
		fts = append(fts, ft)
		sb := rt.AddSandbox("kill", fmt.Sprintf("victim-%02d", k), fmt.Sprintf("victim-%02d", k), fakeruntime.WithIP(victimIP))
		probe := fmt.Sprintf(`{"httpGet":{"port":%d,"path":"/victim/%d"},"periodSeconds":%d,"timeoutSeconds":1,"failureThreshold":%d}`,
			tg.victimPort, k, c.VictimPeriod, ft)
		sandboxes = append(sandboxes, sb)
		ids = append(ids, rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING,
			fakeruntime.WithAnnotations(map[string]string{spec.LivenessAnnotation: probe})))
	}
	tg.victims.reset(sandboxes, ids)
	type stopEvent struct {
		id string
		at time.Time
	}
	stops := make(chan stopEvent, 4096)
	rt.OnStop(func(id string) {
		select {
		case stops <- stopEvent{id, time.Now()}:
		default:
		}
	})
	stopsDone := make(chan struct{})
	go func() {
		defer close(stopsDone)
		for s := range stops {
			tg.victims.stop(rt, s.id, s.at)
		}
	}()
	defer func() {
		rt.OnStop(nil)
		close(stops)
		<-stopsDone
	}()

	if c.Bare != nil {
		// The targets first drain what the previous case left them (after
		// an overload, thousands of connections): a bare loop right after
		// one found its dials timing out.
		<-time.After(bareSettle)
		var bt []bareTarget
		for _, b := range bareTargets {
			if b.Kind == "tcp" || b.Kind == "http" {
				bt = append(bt, b)
			}
		}
		var bare BareRun
		runChild(t, childConfig{Mode: "bare", Warmup: time.Second, Window: c.Bare.Window, Bare: *c.Bare, Targets: bt},
			func(string) {}, &bare)
		r.Bare = &bare
	}

	var start, half time.Time
	var runs0 []int64
	snapshot := func() []int64 {
		out := make([]int64, c.Probes)
		for i := range out {
			out[i] = tg.httpRuns[i].Load()
		}
		return out
	}
	runChild(t, childConfig{Mode: "agent", Endpoint: rt.Endpoint(), Warmup: c.Warmup, Window: c.Window, ProbeMetrics: c.ProbeMetrics},
		func(mark string) {
			switch mark {
			case "START":
				rt.ResetCalls()
				start, runs0 = time.Now(), snapshot()
			case "HALF":
				half = time.Now()
				r.CRICallsPerSecond = map[string]float64{}
				for m, n := range rt.CallCounts() {
					r.CRICallsPerSecond[m] = float64(n) / half.Sub(start).Seconds()
				}
				tg.victims.flip()
			case "END":
				runs1 := snapshot()
				for i := range runs1 {
					if bareTargets[i].Kind == "http" {
						r.HTTPRuns = append(r.HTTPRuns, float64(runs1[i]-runs0[i]))
					}
				}
				// Every victim is to be killed: wait for the last one
				// (its tick can come after the window).
				maxFT := slices.Max(append(slices.Clone(c.VictimFT), 1))
				deadline := time.Now().Add(time.Duration((maxFT+3)*c.VictimPeriod)*time.Second + 30*time.Second)
				for !tg.victims.allStopped() && time.Now().Before(deadline) {
					<-time.After(20 * time.Millisecond)
				}
			}
		}, &r.Agent)

	v := tg.victims
	v.mu.Lock()
	defer v.mu.Unlock()
	r.Spurious = v.spurious
	thresholdAt := map[int]time.Time{}
	for id, nanos := range r.Agent.LivenessFailures {
		k, ok := v.ofID[id]
		at := time.Unix(0, nanos)
		if ok && at.After(v.flipped) && (thresholdAt[k].IsZero() || at.Before(thresholdAt[k])) {
			thresholdAt[k] = at
		}
	}
	r.Agent.LivenessFailures = nil // kept out of the JSON
	for k := range v.stopped {
		if v.stopped[k].IsZero() {
			r.Missed++
			continue
		}
		vr := VictimResult{FailureThreshold: fts[k], PeriodSeconds: c.VictimPeriod, ThresholdStopMs: -1, FirstFailStopMs: -1}
		if th := thresholdAt[k]; !th.IsZero() {
			vr.ThresholdStopMs = float64(v.stopped[k].Sub(th).Microseconds()) / 1000
		}
		if ff := v.firstFail[k]; !ff.IsZero() {
			vr.FirstFailStopMs = float64(v.stopped[k].Sub(ff).Microseconds()) / 1000
		}
		r.Victims = append(r.Victims, vr)
	}
	return r
}

// runChild runs this test binary as a child (TestNodeChild) with cfg,
// calls mark for each of its marks (then lets it go on) and decodes its
// result into out.
func runChild(t *testing.T, cfg childConfig, mark func(string), out any) {
	js, err := json.Marshal(cfg)
	require.NoError(t, err)
	// In a file: thousands of targets are more than an environment
	// variable may hold.
	f, err := os.CreateTemp("", "nodechild*.json")
	require.NoError(t, err)
	defer os.Remove(f.Name())
	_, err = f.Write(js)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	cmd := exec.Command(os.Args[0], "-test.run", "^TestNodeChild$", "-test.v")
	cmd.Env = append(os.Environ(), envNodeChild+"="+f.Name())
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	found := false
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		if m, ok := strings.CutPrefix(line, "MARK "); ok {
			mark(m)
			fmt.Fprintln(in, "GO")
			continue
		}
		if res, ok := strings.CutPrefix(line, "RESULT "); ok {
			require.NoError(t, json.Unmarshal([]byte(res), out))
			found = true
			continue
		}
		if strings.HasPrefix(line, "---") || strings.HasPrefix(line, "===") || line == "PASS" {
			continue
		}
		t.Log(line)
	}
	require.NoError(t, cmd.Wait())
	require.True(t, found, "the %s child printed no result", cfg.Mode)
}

// TestNodeChild is a child process of TestNode: the agent or a bare loop.
func TestNodeChild(t *testing.T) {
	path := os.Getenv(envNodeChild)
	if path == "" {
		t.Skip("run through TestNode")
	}
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var cfg childConfig
	require.NoError(t, json.Unmarshal(raw, &cfg))
	// As the agent's daemon would run: nice 0 (the parent is at 10), and
	// GOMAXPROCS as cri-prober run sets it.
	if err := niceAllThreads(0); err != nil {
		t.Logf("the child stays at the parent's nice value: %v", err)
	}
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(probe.Procs(runtime.GOMAXPROCS(0)))
	}
	parent := bufio.NewReader(os.Stdin)
	mark := func(m string) {
		fmt.Println("MARK " + m)
		line, err := parent.ReadString('\n')
		require.NoError(t, err, "the parent went away")
		require.Equal(t, "GO\n", line)
	}
	var out any
	switch cfg.Mode {
	case "bare":
		out = bareLoop(cfg)
	default:
		out = agentChild(t, cfg, mark)
	}
	js, err := json.Marshal(out)
	require.NoError(t, err)
	fmt.Println("RESULT " + string(js))
}

// nodeAgent is the engine as cri-prober run wires it (pkg/agent), with
// the probe-metrics mode of the case.
type nodeAgent struct {
	*agent.Agent
	client   *cri.Client
	probeReg *prometheus.Registry
	cancel   context.CancelFunc
	done     chan struct{}
}

// probeMetricsMode applies a --probe-metrics mode (per-probe: kubelet's
// series for each probe, the default; aggregate: by probe type only) to the
// engine's config.
func probeMetricsMode(cfg *agent.Config, mode string) error {
	if mode == "" {
		return nil
	}
	m, err := prober.ParseProbeMetrics(mode)
	if err != nil {
		return err
	}
	cfg.Prober.ProbeMetrics = m
	return nil
}

func startNodeAgent(endpoint, metricsMode string, late prometheus.Observer) (*nodeAgent, error) {
	client, err := cri.Dial(context.Background(), endpoint)
	if err != nil {
		return nil, err
	}
	a := &nodeAgent{client: client, probeReg: prometheus.NewRegistry(), done: make(chan struct{})}
	cfg := agent.Config{Client: client, Recorder: events.NewRing(16), Restart: restart.Config{Mode: restart.Recreate},
		ProbeRegistry: a.probeReg, AgentRegistry: prometheus.NewRegistry(), Prober: prober.Config{Lateness: late}}
	if err := probeMetricsMode(&cfg, metricsMode); err != nil {
		client.Close()
		return nil, err
	}
	if a.Agent, err = agent.New(context.Background(), cfg); err != nil {
		client.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go func() {
		defer close(a.done)
		a.Agent.Run(ctx)
	}()
	return a, nil
}

func (a *nodeAgent) stop() {
	a.cancel()
	<-a.done
	a.client.Close()
}

// memSampler samples RSS and the Go heap every 100 ms (runtime/metrics:
// no stop-the-world) until stopped.
type memSampler struct {
	stopCh          chan struct{}
	done            chan struct{}
	rssSum, rssPeak float64
	heapPeak        float64
	n               int
}

func startMemSampler() *memSampler {
	m := &memSampler{stopCh: make(chan struct{}), done: make(chan struct{})}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			rss := harness.RSSMiB()
			metrics.Read(sample)
			m.rssSum += rss
			m.n++
			m.rssPeak = max(m.rssPeak, rss)
			if sample[0].Value.Kind() == metrics.KindUint64 {
				m.heapPeak = max(m.heapPeak, float64(sample[0].Value.Uint64())/(1<<20))
			}
			select {
			case <-m.stopCh:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *memSampler) stop() (mean, peak, heapPeak float64) {
	close(m.stopCh)
	<-m.done
	return m.rssSum / float64(max(m.n, 1)), m.rssPeak, m.heapPeak
}

func agentChild(t *testing.T, cfg childConfig, mark func(string)) AgentRun {
	late := &lateness{}
	a, err := startNodeAgent(cfg.Endpoint, cfg.ProbeMetrics, late)
	require.NoError(t, err)
	defer a.stop()

	// When each container's liveness result turned Failure.
	var failMu sync.Mutex
	failures := map[string]int64{}
	updates := a.Store.Subscribe()
	defer updates.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-updates.Ready():
				now := time.Now().UnixNano()
				for _, u := range updates.Next() {
					if u.Type == results.Liveness && u.Result == results.Failure {
						failMu.Lock()
						if _, seen := failures[u.ContainerID]; !seen {
							failures[u.ContainerID] = now
						}
						failMu.Unlock()
					}
				}
			}
		}
	})
	defer func() {
		cancel()
		wg.Wait()
	}()

	// A benchmark measures over a wall-clock window by nature.
	<-time.After(cfg.Warmup)
	mark("START")
	late.mu.Lock()
	late.on, late.samples = true, nil
	late.mu.Unlock()
	probes0 := sumCounter(t, a.probeReg, "prober_probe_total")
	cpu0, start := cpuSeconds(), time.Now()
	mem := startMemSampler()
	// Where the agent's CPU goes over the window (go tool pprof).
	profiling := false
	if path := os.Getenv("BENCH_AGENT_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			defer f.Close()
			profiling = pprof.StartCPUProfile(f) == nil
		}
	}
	<-time.After(cfg.Window / 2)
	mark("HALF")
	<-time.After(cfg.Window - cfg.Window/2)
	end := time.Now()
	if profiling {
		pprof.StopCPUProfile()
	}
	cpu := cpuSeconds() - cpu0
	rssMean, rssPeak, heapPeak := mem.stop()
	probes := sumCounter(t, a.probeReg, "prober_probe_total") - probes0
	late.mu.Lock()
	samples := slices.Clone(late.samples)
	late.on, late.samples = false, nil
	late.mu.Unlock()
	slices.Sort(samples)
	r := AgentRun{
		Procs: runtime.GOMAXPROCS(0), Probes: probes, Seconds: end.Sub(start).Seconds(), CPUSeconds: cpu,
		LatenessP50Ms: 1000 * percentile(samples, 0.50), LatenessP99Ms: 1000 * percentile(samples, 0.99),
		LatenessMaxMs: 1000 * percentile(samples, 1),
		RSSMeanMiB:    rssMean, RSSPeakMiB: rssPeak, HeapPeakMiB: heapPeak, Goroutines: runtime.NumGoroutine(),
	}
	r.Runs = runsInWindow(a, start, end)
	r.VictimFailures = victimFailures(a)
	samples = nil
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.LiveHeapMiB = float64(ms.HeapAlloc) / (1 << 20)
	if path := os.Getenv("BENCH_AGENT_HEAPPROFILE"); path != "" {
		// What the live heap holds (go tool pprof -sample_index=inuse_space).
		if f, err := os.Create(path); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	mark("END") // the parent waits for the last planned kill
	failMu.Lock()
	r.LivenessFailures = failures
	failMu.Unlock()
	return r
}

// runsInWindow counts each readiness probe's runs between start and end
// from its history, read after the window so that it costs the window
// nothing; nil when the history may hold fewer runs than the window had.
// victimFailures lists every failed liveness probe of the victims the
// agent's histories kept.
func victimFailures(a *nodeAgent) []VictimFailure {
	var out []VictimFailure
	for _, p := range a.View().Pods() {
		if p.Namespace != "kill" {
			continue
		}
		for _, h := range a.Histories.For(p.Key) {
			if h.Type != results.Liveness {
				continue
			}
			for _, o := range h.Failures {
				out = append(out, VictimFailure{Pod: p.Name, At: o.Time.UnixNano(), Output: o.Output + o.Err})
			}
		}
	}
	return out
}

func runsInWindow(a *nodeAgent, start, end time.Time) []float64 {
	var out []float64
	for _, p := range a.View().Pods() {
		if p.Namespace != "load" {
			continue
		}
		for _, h := range a.Histories.For(p.Key) {
			if h.Type != results.Readiness {
				continue
			}
			if len(h.Recent) >= results.HistoryRecent && !h.Recent[0].Time.Before(start) {
				return nil // the history does not reach back to the window's start
			}
			n := 0
			for _, o := range h.Recent {
				if !o.Time.Before(start) && o.Time.Before(end) {
					n++
				}
			}
			out = append(out, float64(n))
		}
	}
	return out
}

// bareLoop does the mix's work with plain Go: a TCP connect and close with
// kubelet's SO_LINGER of 1 s, or one HTTP/1.1 GET on a new connection;
// Workers goroutines, as fast as they can or paced at Rate.
func bareLoop(cfg childConfig) BareRun {
	d := &net.Dialer{Timeout: time.Second, Control: func(_, _ string, c syscall.RawConn) error { return probe.Linger(c) }}
	requests := make([][]byte, len(cfg.Targets))
	for i, tg := range cfg.Targets {
		if tg.Kind == "http" {
			requests[i] = fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: kube-probe/1.33\r\nAccept: */*\r\nConnection: close\r\n\r\n", tg.Path, tg.Addr)
		}
	}
	var httpOK, tcpOK, errs atomic.Int64
	var next atomic.Int64
	one := func(n int64) {
		i := int(n % int64(len(cfg.Targets)))
		tg := cfg.Targets[i]
		ok := false
		c, err := d.Dial("tcp", tg.Addr)
		if err == nil {
			if tg.Kind == "http" {
				ok = bareHTTP(c, requests[i])
			} else {
				ok = true
			}
			c.Close()
		}
		switch {
		case !ok:
			errs.Add(1)
		case tg.Kind == "http":
			httpOK.Add(1)
		default:
			tcpOK.Add(1)
		}
	}
	// Paced, operation i is due at t0 + i/Rate: each goroutine sleeps
	// until the next one due (a timer per operation, as the agent has one
	// per probe run); unpaced, each goes on as fast as it can.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t0 := time.Now()
	for range cfg.Bare.Workers {
		wg.Go(func() {
			for {
				n := next.Add(1) - 1
				if cfg.Bare.Rate > 0 {
					due := t0.Add(time.Duration(float64(n) * float64(time.Second) / float64(cfg.Bare.Rate)))
					if wait := time.Until(due); wait > 0 {
						timer := time.NewTimer(wait)
						select {
						case <-stop:
							timer.Stop()
							return
						case <-timer.C:
						}
					}
				}
				select {
				case <-stop:
					return
				default:
				}
				one(n)
			}
		})
	}
	<-time.After(cfg.Warmup)
	h0, c0, e0 := httpOK.Load(), tcpOK.Load(), errs.Load()
	cpu0, start := cpuSeconds(), time.Now()
	mem := startMemSampler()
	<-time.After(cfg.Window)
	r := BareRun{Procs: runtime.GOMAXPROCS(0), Workers: cfg.Bare.Workers, Seconds: time.Since(start).Seconds(), CPUSeconds: cpuSeconds() - cpu0,
		Ops: map[string]float64{"http": float64(httpOK.Load() - h0), "tcp": float64(tcpOK.Load() - c0)}, Errors: float64(errs.Load() - e0)}
	_, r.RSSPeakMiB, _ = mem.stop()
	close(stop)
	wg.Wait()
	return r
}

func bareHTTP(c net.Conn, req []byte) bool {
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(req); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 4096), nil)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, probe.MaxBody))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// writeSection replaces the generated section name of the markdown file at
// path, or appends it under heading when the file has none: everything
// else in the file (hand-written text, other tests' sections) is kept.
func writeSection(path, name, heading, body string) error {
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if !strings.Contains(string(raw), "<!-- "+name+":begin") {
		doc := strings.TrimRight(string(raw), "\n") + "\n\n" + heading + "\n\n<!-- " + name + ":begin (written by make bench) -->\n<!-- " + name + ":end -->\n"
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			return err
		}
	}
	return harness.WriteSection(path, name, body)
}
