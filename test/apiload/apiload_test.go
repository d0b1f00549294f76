// Package apiload floods the state API of an agent that has few file
// descriptors, as a local user or a pod could (issue 14): the agent must
// go on probing without blaming or killing anyone, and answer /healthz.
package apiload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/spec"
	"github.com/cri-prober/cri-prober/test/harness"
)

const (
	// endpointEnv hands the child (the agent) the fake runtime's endpoint.
	endpointEnv = "CRI_PROBER_APILOAD_ENDPOINT"
	// plainEnv=1 serves the API as before issue 14 (an http.Server with a
	// header timeout only), to see this test fail there.
	plainEnv = "CRI_PROBER_APILOAD_PLAIN"
	// listenPrefix starts the child's line that says where the API is.
	listenPrefix = "APILOAD_LISTEN "

	// fdLimit is the agent's RLIMIT_NOFILE: far above what it needs
	// (the API's connection cap and the probes' sockets), far below the
	// flood.
	fdLimit       = 512
	idleConns     = 2000
	streamClients = 100
	containers    = 30
	// clientTimeout is what /healthz gets to answer from a new
	// connection: a kubelet probe's timeout would be shorter.
	clientTimeout = 5 * time.Second
)

// The agent runs in a child process whose descriptors are limited to
// fdLimit; this process is the runtime, the probes' target and the
// flood: 2,000 idle connections and 100 event streams that never read.
// While they are open, /healthz answers from a new connection, the probes
// go on (prober_probe_total grows, none comes out unknown for want of a
// descriptor) and no container is stopped.
//
// Against the server before issue 14 (CRI_PROBER_APILOAD_PLAIN=1) the agent
// runs out of descriptors: /healthz does not answer, probes error.
func TestAPIUnderConnectionFlood(t *testing.T) {
	if endpoint := os.Getenv(endpointEnv); endpoint != "" {
		runAgent(t, endpoint)
		return
	}
	s := startProbed(t, "load", containers, 30*time.Second, func(port string) map[string]string {
		return map[string]string{
			spec.LivenessAnnotation: fmt.Sprintf(`{"httpGet":{"port":%s,"path":"/"},"periodSeconds":1,"failureThreshold":1}`, port)}
	})
	agent, client, url, before := s.agent, s.client, s.url, s.before
	var m metrics

	// The flood. Idle connections first, then streams that never read.
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range idleConns {
		c, err := net.DialTimeout("tcp", agent.addr, clientTimeout)
		require.NoError(t, err, "after %d connections", len(flood))
		flood = append(flood, c)
	}
	for range streamClients {
		c, err := net.DialTimeout("tcp", agent.addr, clientTimeout)
		require.NoError(t, err)
		flood = append(flood, c)
		_, err = fmt.Fprintf(c, "GET /api/v1/events?watch=1 HTTP/1.1\r\nHost: %s\r\n\r\n", agent.addr)
		require.NoError(t, err)
	}
	t.Logf("flood open: %d idle connections, %d event streams that never read", idleConns, streamClients)

	// A client that comes after the flood gets its answer.
	for range 3 {
		code, err := get(client, url+"/healthz")
		require.NoError(t, err, "/healthz from a new connection during the flood\nagent:\n%s", agent.output())
		require.Equal(t, http.StatusOK, code)
	}
	// The probes go on: two more rounds of every container's.
	require.Eventually(t, func() bool {
		m = scrape(t, client, url)
		return m.sum("prober_probe_total", "") >= before.sum("prober_probe_total", "")+2*containers
	}, 30*time.Second, 100*time.Millisecond, "probes run during the flood\nagent:\n%s", agent.output())
	code, err := get(client, url+"/healthz")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)

	assert.Zero(t, s.stops.Load(), "no container stopped")
	assert.Equal(t, before.sum("prober_probe_total", `result="unknown"`), m.sum("prober_probe_total", `result="unknown"`), "no probe could not run")
	assert.Zero(t, m.sum("cri_prober_agent_resource_errors_total", ""), "the agent never ran out of descriptors")
	assert.Equal(t, before.sum("prober_probe_total", `result="failed"`), m.sum("prober_probe_total", `result="failed"`), "no probe failed")
	assert.LessOrEqual(t, m.sum("cri_prober_api_connections", ""), float64(api.DefaultMaxConnections))
	assert.Equal(t, float64(api.DefaultMaxEventStreams), m.sum("cri_prober_api_event_streams", ""), "the streams that never read hold their slots, no more")
	assert.Positive(t, m.sum("cri_prober_api_rejected_total", `reason="stream_limit"`))
	assert.Positive(t, m.sum("cri_prober_api_dropped_total", `reason="idle_at_limit"`))
	t.Logf("API: %v connections, %v streams; rejected %v streams; closed %v idle connections to make room",
		m.sum("cri_prober_api_connections", ""), m.sum("cri_prober_api_event_streams", ""),
		m.sum("cri_prober_api_rejected_total", `reason="stream_limit"`), m.sum("cri_prober_api_dropped_total", `reason="idle_at_limit"`))
	t.Logf("probes: %v before the flood, %v after", before.sum("prober_probe_total", ""), m.sum("prober_probe_total", ""))
	agent.stop(t)
}

// busyPods and busyConns make the flood of expensive requests of the
// security review (finding 2): the pod list is about 300 KB at 100 pods,
// asked for by busyConns clients in a loop for busyFlood.
const (
	busyPods  = 100
	busyConns = 64
	busyFlood = 6 * time.Second
)

// A local client asking the pod list (and the status page, and /metrics)
// as fast as 64 connections can, for 6 s, while 100 pods' liveness and
// readiness probes run every second with a 1 s timeout against a healthy
// target, the agent on one CPU: no probe fails, no container is stopped.
// The expensive requests beyond the API's bound are answered 503, the
// pod list is made once per state, and a probe the agent itself starved
// would be "could not probe", never the target's failure. Before (the
// review's repro, 300 pods): 83 probe timeouts in 6 s, 37 of them
// liveness.
func TestAPIUnderBusyFlood(t *testing.T) {
	if endpoint := os.Getenv(endpointEnv); endpoint != "" {
		pinToOneCPU(t)
		runAgent(t, endpoint)
		return
	}
	s := startProbed(t, "busy", busyPods, 60*time.Second, func(port string) map[string]string {
		return map[string]string{
			spec.LivenessAnnotation:  fmt.Sprintf(`{"httpGet":{"port":%s,"path":"/"},"periodSeconds":1,"timeoutSeconds":1,"failureThreshold":1}`, port),
			spec.ReadinessAnnotation: fmt.Sprintf(`{"httpGet":{"port":%s,"path":"/"},"periodSeconds":1,"timeoutSeconds":1}`, port)}
	})
	agent, client, url, before := s.agent, s.client, s.url, s.before

	ctx, cancel := context.WithTimeout(context.Background(), busyFlood)
	defer cancel()
	var served, busy, other atomic.Int64
	var wg sync.WaitGroup
	paths := []string{"/api/v1/pods", "/api/v1/pods", "/api/v1/pods", "/", "/metrics"}
	for i := range busyConns {
		wg.Go(func() {
			flooder := &http.Client{Timeout: 10 * time.Second} // keep-alive: as fast as it can
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+paths[i%len(paths)], nil)
				resp, err := flooder.Do(req)
				if err != nil {
					other.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body) //nolint:errcheck // draining
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					served.Add(1)
				case http.StatusServiceUnavailable:
					busy.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("flood: %d requests served, %d answered 503 (busy), %d other", served.Load(), busy.Load(), other.Load())
	// The flood's last scrapes may still be served: wait for a scrape.
	var m metrics
	require.Eventually(t, func() bool { m = scrape(t, client, url); return m != nil }, 30*time.Second, 100*time.Millisecond, "a scrape after the flood")

	assert.Zero(t, s.stops.Load(), "no container stopped")
	failed := m.sum("prober_probe_total", `result="failed"`) - before.sum("prober_probe_total", `result="failed"`)
	assert.Zero(t, failed, "no probe failed\nagent:\n%s", agent.output())
	assert.Positive(t, busy.Load()+served.Load(), "the flood reached the agent")
	assert.Positive(t, busy.Load(), "beyond the bounds, requests were answered 503")
	t.Logf("probes: %v during the flood; %v could not probe (the agent starved: %v)",
		m.sum("prober_probe_total", "")-before.sum("prober_probe_total", ""),
		m.sum("prober_probe_total", `result="unknown"`)-before.sum("prober_probe_total", `result="unknown"`),
		m.sum("cri_prober_agent_resource_errors_total", `cause="CPU"`))
	agent.stop(t)
}

// pinToOneCPU keeps the agent to one CPU, as the review ran it: a flood
// then competes with the probes for it (the machines have 2).
func pinToOneCPU(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() < 2 {
		return
	}
	var one unix.CPUSet
	for cpu := range 1024 {
		if set.IsSet(cpu) {
			one.Set(cpu)
			break
		}
	}
	// Every thread of the process: the ones started later inherit it.
	tasks, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		unix.SchedSetaffinity(tid, &one) //nolint:errcheck // a thread gone meanwhile
	}
}

// probed is an agent (a child process) probing pods of the fake runtime
// against a healthy target, its probes seen running.
type probed struct {
	agent  *child
	client *http.Client // a new connection per request, as a prober's
	url    string
	before metrics       // once every container's probes ran twice
	stops  *atomic.Int64 // StopContainer calls
}

// startProbed serves a healthy HTTP target, makes n pods in namespace ns
// whose container "app" carries the probe annotations of probes(target's
// port), runs the agent on them, and waits up to wait until each probe
// ran twice.
func startProbed(t *testing.T, ns string, n int, wait time.Duration, probes func(port string) map[string]string) probed {
	t.Helper()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	t.Cleanup(target.Close)
	_, port, _ := net.SplitHostPort(target.Listener.Addr().String())
	annotations := probes(port)
	rt := fakeruntime.NewForTest(t)
	for i := range n {
		sb := rt.AddSandbox(ns, fmt.Sprintf("pod-%03d", i), fmt.Sprintf("uid-%03d", i), fakeruntime.WithIP("127.0.0.1"))
		rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAnnotations(annotations))
	}
	s := probed{stops: &atomic.Int64{}}
	rt.OnStop(func(string) { s.stops.Add(1) })

	s.agent = startChild(t, rt.Endpoint())
	s.client = &http.Client{Timeout: clientTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	s.url = "http://" + s.agent.addr
	require.Eventually(t, func() bool {
		s.before = scrape(t, s.client, s.url)
		return s.before.sum("prober_probe_total", "") >= float64(2*n*len(annotations))
	}, wait, 100*time.Millisecond, "the probes run before the flood")
	return s
}

// child is the agent's process.
type child struct {
	addr  string
	cmd   *exec.Cmd
	stdin io.Closer
	done  chan struct{} // its output read to the end

	mu  sync.Mutex
	out strings.Builder
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// startChild runs this test again in a child process, as the agent, and
// waits for its API's address.
func startChild(t *testing.T, endpoint string) *child {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), endpointEnv+"="+endpoint)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.out.WriteString(line + "\n")
			c.mu.Unlock()
			if a, ok := strings.CutPrefix(line, listenPrefix); ok {
				addr <- a
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait() //nolint:errcheck // stop reports it
	})
	select {
	case c.addr = <-addr:
	case <-c.done:
		t.Fatalf("the agent ended before serving:\n%s", c.output())
	case <-ctx.Done():
		t.Fatalf("the agent did not serve:\n%s", c.output())
	}
	return c
}

// stop ends the agent (its stdin closed) and requires that it passed.
func (c *child) stop(t *testing.T) {
	t.Helper()
	c.stdin.Close()
	<-c.done
	err := c.cmd.Wait()
	require.NoError(t, err, "agent:\n%s", c.output())
	require.Contains(t, c.output(), "--- PASS: "+t.Name(), "agent:\n%s", c.output())
}

// runAgent is the child: the engine and its API, with few descriptors,
// until stdin closes.
func runAgent(t *testing.T, endpoint string) {
	var limit syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &limit))
	limit.Cur = fdLimit
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &limit))

	ring := events.NewRing(1000)
	agent, err := harness.Start(endpoint, harness.Options{Recorder: ring})
	require.NoError(t, err)
	defer agent.Stop()
	server := api.New(api.Config{
		Pods: agent.Agent, History: agent.Histories, Events: ring, Health: agent.Health,
		Metrics:      api.MetricsHandler(prometheus.Gatherers{agent.AgentRegistry, agent.ProbeRegistry}),
		ProbeMetrics: api.MetricsHandler(agent.ProbeRegistry),
		Registerer:   agent.AgentRegistry,
	})
	l, err := api.Listen("127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	if os.Getenv(plainEnv) == "1" {
		old := &http.Server{Handler: server.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { served <- old.Serve(l) }()
		go func() { <-ctx.Done(); old.Close() }()
	} else {
		go func() { served <- server.Serve(ctx, l, api.ServeConfig{}) }() // the defaults, as run serves
	}
	fmt.Println(listenPrefix + l.Addr().String())
	io.Copy(io.Discard, os.Stdin) //nolint:errcheck // until the parent is done
	fds, _ := os.ReadDir("/proc/self/fd")
	t.Logf("open descriptors at the end: %d (limit %d)", len(fds), fdLimit)
	cancel()
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.Error(err)
	}
}

func get(client *http.Client, url string) (int, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body) //nolint:errcheck
	return resp.StatusCode, nil
}

// metrics are the series of a scrape, by their name{labels}.
type metrics map[string]float64

// scrape reads /metrics (empty if it does not answer).
func scrape(t *testing.T, client *http.Client, url string) metrics {
	t.Helper()
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		t.Logf("scrape: %v", err)
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// A busy answer (503) is no scrape: summed as empty, it would make
		// the counts after a flood look lower than before.
		t.Logf("scrape: %s", resp.Status)
		return nil
	}
	m := metrics{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// sum adds up the series of a family whose labels include label.
func (m metrics) sum(name, label string) float64 {
	var total float64
	for series, v := range m {
		family, labels, _ := strings.Cut(series, "{")
		if family == name && strings.Contains(labels, label) {
			total += v
		}
	}
	return total
}
