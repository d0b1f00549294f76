//go:build bench

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/probe"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
	"github.com/cri-prober/cri-prober/test/harness"
)

// The hostile-target benchmark (issue 13): an agent probes 100 ordinary
// containers and one container per hostile kind, each of those probed
// every 2 s with a 1 s timeout. The hostile targets first answer as
// ordinary ones; after a measured window they turn hostile and the same
// window is measured again, so the difference is what hostile answers cost
// (not more pods or bigger relists). The agent runs in a child process of
// its own, so that its RSS is the agent's alone: the fake runtime and every
// target (which must hold megabytes to send them) stay in the parent.

const (
	hostileNamespace = "hostile"
	hostileGood      = 100
	envHostileAgent  = "CRI_PROBER_HOSTILE_ENDPOINT"
)

// hostile is one target that sends what no probe should have to read.
type hostile struct {
	name  string
	probe string // the readiness probe, as the annotation's JSON
	ext   string // the probe-extensions annotation, if any
	ip    string
}

// HostileResult is what the child measured: windows alternating ordinary
// and hostile answers, starting with ordinary ones.
type HostileResult struct {
	Windows []HostileWindow
	// Outputs are each hostile container's last probe outcome and text, as
	// the agent kept them.
	Outputs map[string]string
}

// HostileWindow is one measured window.
type HostileWindow struct {
	Hostile       bool
	RSSPeakMiB    float64
	RSSMeanMiB    float64
	HeapPeakMiB   float64
	LatenessP99Ms float64
	LatenessMaxMs float64
	Probes        float64
}

func TestHostile(t *testing.T) {
	if os.Getenv(envHostileAgent) != "" {
		t.Skip("child process")
	}
	// The workloads yield to the agent, as under a node's CPU reservation
	// for its daemons (kubelet's system-reserved): what is measured is the
	// agent, not two processes fighting over two cores.
	require.NoError(t, syscall.Setpriority(syscall.PRIO_PROCESS, 0, 10))
	tg := startTargets(t)
	rt := fakeruntime.NewForTest(t)
	for p := range hostileGood / 10 {
		sb := rt.AddSandbox("load", fmt.Sprintf("pod-%05d", p), fmt.Sprintf("uid-%05d", p), fakeruntime.WithIP(podIP(p)))
		for c := range 10 {
			rt.AddContainer(sb, fmt.Sprintf("c%d", c), runtimeapi.ContainerState_CONTAINER_RUNNING,
				fakeruntime.WithAnnotations(map[string]string{spec.ReadinessAnnotation: probeFor(p*10+c, tg)}))
		}
	}
	var on atomic.Bool // the hostile targets are hostile
	targets := startHostileTargets(t, &on)
	ids := map[string]string{} // container ID → hostile name
	for _, h := range targets {
		sb := rt.AddSandbox(hostileNamespace, h.name, "uid-"+h.name, fakeruntime.WithIP(h.ip))
		ann := map[string]string{spec.ReadinessAnnotation: h.probe}
		if h.ext != "" {
			ann[spec.ExtensionsAnnotation] = h.ext
		}
		ids[rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAnnotations(ann))] = h.name
	}
	loud := make([]byte, 16<<20-1024) // what containerd 1.6 can send at most
	rt.SetExecHandler(func(ctx context.Context, id string, _ []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
		name := ids[id]
		if !on.Load() {
			name = ""
		}
		switch name {
		case "exec-16MiB-output":
			return &runtimeapi.ExecSyncResponse{ExitCode: 1, Stdout: loud}, nil
		case "exec-1MiB-error":
			return nil, status.Error(codes.Unknown, strings.Repeat("e", 1<<20))
		case "exec-never-exits":
			select { // containerd ends it at the timeout
			case <-time.After(timeout):
				return nil, status.Errorf(codes.DeadlineExceeded, "timeout %v exceeded", timeout)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &runtimeapi.ExecSyncResponse{Stdout: []byte("ok")}, nil
	})

	cmd := exec.Command(os.Args[0], "-test.run", "^TestHostileAgent$", "-test.v", "-warmup", warmup.String(), "-window", window.String())
	cmd.Env = append(os.Environ(), envHostileAgent+"="+rt.Endpoint())
	cmd.Stderr = os.Stderr
	childIn, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	require.NoError(t, syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, 0))

	var result HostileResult
	found := false
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "TURN-HOSTILE", line == "TURN-ORDINARY":
			on.Store(line == "TURN-HOSTILE")
			fmt.Fprintln(childIn, "TURNED")
		case strings.HasPrefix(line, "RESULT "):
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "RESULT ")), &result))
			found = true
		default:
			t.Log(line)
		}
	}
	require.NoError(t, cmd.Wait())
	require.True(t, found, "the agent printed no result")
	t.Logf("%+v", result)
	if *reportPath != "" {
		require.NoError(t, harness.WriteSection(*reportPath, "hostile", hostileMarkdown(result, targets)))
	}
}

// hostileWindows is how many windows are measured, alternating ordinary
// and hostile answers: the RSS of one window against the next moves by
// about a MiB with GC timing alone, so each kind is measured twice.
const hostileWindows = 4

// TestHostileAgent is the agent's process: it asks the parent to turn the
// hostile targets on or off, waits until each was probed since, and
// measures a window.
func TestHostileAgent(t *testing.T) {
	endpoint := os.Getenv(envHostileAgent)
	if endpoint == "" {
		t.Skip("run through TestHostile")
	}
	if os.Getenv("GOMAXPROCS") == "" { // as cri-prober run does
		runtime.GOMAXPROCS(probe.Procs(runtime.GOMAXPROCS(0)))
	}
	late := &lateness{}
	agent, err := harness.Start(endpoint, harness.Options{Lateness: late})
	require.NoError(t, err)
	defer agent.Stop()
	parent := bufio.NewReader(os.Stdin)

	// A benchmark measures over wall-clock windows by nature.
	<-time.After(*warmup)
	var r HostileResult
	// The allocations of window i: go tool pprof -base PATH.i PATH.i+1.
	profile := os.Getenv("CRI_PROBER_HOSTILE_ALLOCS")
	for i := range hostileWindows {
		hostile := i%2 == 1
		fmt.Println(map[bool]string{true: "TURN-HOSTILE", false: "TURN-ORDINARY"}[hostile])
		line, err := parent.ReadString('\n')
		require.NoError(t, err, "the parent went away")
		require.Equal(t, "TURNED\n", line)
		turned := time.Now()
		// The window starts once every hostile target was probed since.
		eventually(t, 30*time.Second, func() bool {
			n := 0
			for _, p := range agent.View().Pods() {
				if p.Namespace != hostileNamespace || len(p.Containers) == 0 || p.Containers[0].Current == nil {
					continue
				}
				o, ok := agent.Store.LastObservation(results.Key{ContainerID: p.Containers[0].Current.ID, Type: results.Readiness})
				if ok && o.Time.After(turned) {
					n++
				}
			}
			return n == hostileCount
		})
		if profile != "" {
			writeAllocs(t, fmt.Sprintf("%s.%d", profile, i))
		}
		w := measureWindow(t, agent, late)
		w.Hostile = hostile
		r.Windows = append(r.Windows, w)
		if hostile {
			r.Outputs = lastOutputs(agent)
		}
	}
	if profile != "" {
		writeAllocs(t, fmt.Sprintf("%s.%d", profile, hostileWindows))
	}
	js, err := json.Marshal(r)
	require.NoError(t, err)
	fmt.Println("RESULT " + string(js))
}

// lastOutputs returns what the agent kept of each hostile container's last
// probe run.
func lastOutputs(agent *harness.Agent) map[string]string {
	out := map[string]string{}
	for _, p := range agent.View().Pods() {
		if p.Namespace != hostileNamespace || len(p.Containers) == 0 || p.Containers[0].Current == nil {
			continue
		}
		if o, ok := agent.Store.LastObservation(results.Key{ContainerID: p.Containers[0].Current.ID, Type: results.Readiness}); ok {
			text := o.Output
			if o.Err != "" {
				text = "error: " + o.Err
			}
			out[p.Name] = fmt.Sprintf("%s (%d bytes kept): %.160q", o.Outcome, len(text), text)
		}
	}
	return out
}

func writeAllocs(t *testing.T, path string) {
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, pprof.Lookup("allocs").WriteTo(f, 0))
	require.NoError(t, f.Close())
}

// measureWindow samples the process's RSS and heap every 50 ms over one
// window and collects the probes' lateness meanwhile.
func measureWindow(t *testing.T, agent *harness.Agent, late *lateness) HostileWindow {
	late.mu.Lock()
	late.on, late.samples = true, nil
	late.mu.Unlock()
	probes0 := sumCounter(t, agent.ProbeRegistry, "prober_probe_total")
	var w HostileWindow
	var rssSum float64
	n := 0
	deadline := time.Now().Add(*window)
	for time.Now().Before(deadline) {
		rss := harness.RSSMiB()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		w.RSSPeakMiB = max(w.RSSPeakMiB, rss)
		w.HeapPeakMiB = max(w.HeapPeakMiB, float64(ms.HeapInuse)/(1<<20))
		rssSum += rss
		n++
		<-time.After(50 * time.Millisecond)
	}
	w.RSSMeanMiB = rssSum / float64(n)
	w.Probes = sumCounter(t, agent.ProbeRegistry, "prober_probe_total") - probes0
	late.mu.Lock()
	samples := slices.Clone(late.samples)
	late.on = false
	late.mu.Unlock()
	slices.Sort(samples)
	w.LatenessP99Ms = 1000 * percentile(samples, 0.99)
	w.LatenessMaxMs = 1000 * percentile(samples, 1)
	return w
}

func eventually(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "hostile targets not probed within %s", timeout)
		<-time.After(50 * time.Millisecond)
	}
}

// hostileCount is how many hostile targets the parent adds
// (CRI_PROBER_HOSTILE_ONLY=name,… picks some, to find which one a figure
// comes from).
var hostileCount = func() int {
	if only := os.Getenv("CRI_PROBER_HOSTILE_ONLY"); only != "" {
		return len(strings.Split(only, ","))
	}
	return len(hostileNames)
}()

var hostileNames = []string{
	"http-5MiB-status-line", "http-5MiB-headers", "http-endless-body", "http-trickle", "http-body-regexp",
	"tcp-accept-never-read", "grpc-1MiB-status-message", "grpc-trickle",
	"exec-16MiB-output", "exec-1MiB-error", "exec-never-exits",
}

// startHostileTargets serves each hostile network target on an address of
// its own and describes every hostile container.
func startHostileTargets(t *testing.T, on *atomic.Bool) []hostile {
	t.Helper()
	var out []hostile
	addr := func(i int) string { return fmt.Sprintf("127.0.2.%d", 1+i) }
	readRequest := func(c net.Conn) {
		c.SetReadDeadline(time.Now().Add(time.Second))
		http.ReadRequest(bufio.NewReader(c)) //nolint:errcheck // any request will do
	}
	serve := func(i int, handle func(net.Conn)) int {
		return harness.ServeOnAll(t, []string{addr(i)}, func(l net.Listener) {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					if on.Load() {
						handle(c)
						return
					}
					readRequest(c) // an ordinary answer, for any kind
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nc")
				}()
			}
		})
	}
	chunk := []byte(strings.Repeat("x", 64<<10))
	// writeFor writes chunks until n bytes are out or the probe hangs up.
	writeFor := func(c net.Conn, n int, b []byte) {
		for sent := 0; sent < n; sent += len(b) {
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	}
	const period = `"periodSeconds":2,"timeoutSeconds":1`
	httpProbe := func(port int) string {
		return fmt.Sprintf(`{"httpGet":{"port":%d,"path":"/"},%s}`, port, period)
	}
	for i, name := range hostileNames {
		if only := os.Getenv("CRI_PROBER_HOSTILE_ONLY"); only != "" && !slices.Contains(strings.Split(only, ","), name) {
			continue
		}
		h := hostile{name: name, ip: addr(i)}
		switch name {
		case "http-5MiB-status-line":
			h.probe = httpProbe(serve(i, func(c net.Conn) {
				readRequest(c)
				io.WriteString(c, "HTTP/1.1 200 ")
				writeFor(c, 5<<20, chunk)
			}))
		case "http-5MiB-headers":
			line := []byte("X-Junk: " + strings.Repeat("j", 1000) + "\r\n")
			h.probe = httpProbe(serve(i, func(c net.Conn) {
				readRequest(c)
				io.WriteString(c, "HTTP/1.1 200 OK\r\n")
				writeFor(c, 5<<20, line)
			}))
		case "http-endless-body":
			h.probe = httpProbe(serve(i, func(c net.Conn) {
				readRequest(c)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1099511627776\r\n\r\n")
				writeFor(c, 1<<40, chunk)
			}))
		case "http-trickle":
			h.probe = httpProbe(serve(i, func(c net.Conn) {
				readRequest(c)
				io.WriteString(c, "HTTP/1.1 200 OK\r\n")
				for range 100 { // one byte of header every 50 ms, past the timeout
					if _, err := c.Write([]byte("X")); err != nil {
						return
					}
					<-time.After(50 * time.Millisecond)
				}
			}))
		case "http-body-regexp":
			body := strings.Repeat("a", 10<<10)
			h.probe = httpProbe(serve(i, func(c net.Conn) {
				readRequest(c)
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			}))
			// Near the size limit, never matching: the whole body is scanned.
			re := strings.Repeat("(?:a|b)?", (spec.MaxBodyRegexp-1)/8) + "c"
			h.ext = fmt.Sprintf(`{"readinessProbe":{"httpGet":{"failIfBodyNotMatchesRegexp":%q}}}`, re)
		case "tcp-accept-never-read":
			h.probe = fmt.Sprintf(`{"tcpSocket":{"port":%d},%s}`, serve(i, func(c net.Conn) { <-time.After(time.Minute) }), period)
		case "grpc-1MiB-status-message":
			srv := grpc.NewServer()
			healthpb.RegisterHealthServer(srv, hostileHealth{on: on})
			t.Cleanup(srv.Stop)
			port := harness.ServeOnAll(t, []string{addr(i)}, func(l net.Listener) { srv.Serve(l) })
			h.probe = fmt.Sprintf(`{"grpc":{"port":%d},%s}`, port, period)
		case "grpc-trickle":
			// Accepts, then sends a byte now and then that is never a
			// complete HTTP/2 frame.
			h.probe = fmt.Sprintf(`{"grpc":{"port":%d},%s}`, serve(i, func(c net.Conn) {
				for range 100 {
					if _, err := c.Write([]byte{0}); err != nil {
						return
					}
					<-time.After(50 * time.Millisecond)
				}
			}), period)
		default: // exec-…
			h.probe = fmt.Sprintf(`{"exec":{"command":["check"]},%s}`, period)
		}
		out = append(out, h)
	}
	return out
}

// hostileHealth answers every health check with a 1 MiB status message
// once on.
type hostileHealth struct {
	healthpb.UnimplementedHealthServer
	on *atomic.Bool
}

func (h hostileHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if !h.on.Load() {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
	}
	return nil, status.Error(codes.Unavailable, strings.Repeat("m", 1<<20))
}

func hostileMarkdown(r HostileResult, targets []hostile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured by `make bench` (`TestHostile`), %s: the agent (in a process of its own) probes %d ordinary\n"+
		"containers (the load mix, period 1 s) and %d more, one per hostile kind, every 2 s with a 1 s timeout. Those\n"+
		"answer as ordinary targets, then hostile, then ordinary and hostile again, a %s window each, so the\n"+
		"difference is what the hostile answers cost. RSS is sampled every 50 ms. The targets and the fake runtime\n"+
		"run in another process at nice 10 (a node's CPU reservation for its daemons), so that the agent is measured,\n"+
		"not two processes sharing two cores.\n\n",
		time.Now().UTC().Format("2006-01-02"), hostileGood, len(targets), *window)
	b.WriteString("| window | answers | RSS peak / mean | Go heap peak | probes | lateness p99 / max |\n|---:|---|---|---|---:|---|\n")
	var peak, late99, lateMax [2][]float64 // by hostile
	for i, w := range r.Windows {
		kind := map[bool]string{true: "hostile", false: "ordinary"}[w.Hostile]
		fmt.Fprintf(&b, "| %d | %s | %.1f / %.1f MiB | %.1f MiB | %.0f | %s / %s |\n", i+1, kind, w.RSSPeakMiB, w.RSSMeanMiB,
			w.HeapPeakMiB, w.Probes, ms(w.LatenessP99Ms), ms(w.LatenessMaxMs))
		h := 0
		if w.Hostile {
			h = 1
		}
		peak[h] = append(peak[h], w.RSSPeakMiB)
		late99[h] = append(late99[h], w.LatenessP99Ms)
		lateMax[h] = append(lateMax[h], w.LatenessMaxMs)
	}
	mean := func(v []float64) float64 {
		var sum float64
		for _, x := range v {
			sum += x
		}
		return sum / float64(max(1, len(v)))
	}
	check := func(ok bool) string { return map[bool]string{true: "met", false: "**not met**"}[ok] }
	growth := mean(peak[1]) - mean(peak[0])
	fmt.Fprintf(&b, "\n- Agent RSS grows by at most 2 MiB: %+.1f MiB (mean peak of the hostile windows against the ordinary ones) — %s.\n",
		growth, check(growth <= 2))
	worst99, worstMax := slices.Max(late99[1]), slices.Max(lateMax[1])
	fmt.Fprintf(&b, "- No other probe late by more than 10 ms: with the hostile answers, lateness p99 %s — %s; the single worst\n"+
		"  tick %s — %s (with ordinary answers only: %s).\n",
		ms(worst99), check(worst99 <= 10), ms(worstMax), check(worstMax <= 10), ms(slices.Max(lateMax[0])))
	b.WriteString("\n| hostile target | what the agent kept of its last run |\n|---|---|\n")
	for _, h := range targets {
		fmt.Fprintf(&b, "| %s | %s |\n", h.name, strings.ReplaceAll(r.Outputs[h.name], "|", `\|`))
	}
	return b.String()
}
