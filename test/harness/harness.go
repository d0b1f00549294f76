// Package harness runs cri-prober's engine in-process, wired as `cri-prober
// run` wires it (pkg/agent), against a CRI endpoint: the load and soak
// harnesses drive it at node scale.
package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/restart"
)

// Agent is the running engine.
type Agent struct {
	*agent.Agent
	Client        *cri.Client
	ProbeRegistry *prometheus.Registry // kubelet's per-probe series
	AgentRegistry *prometheus.Registry // the agent's own

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Options adjusts the engine.
type Options struct {
	Recorder interface{ Record(events.Event) } // default: a small ring
	Lateness prometheus.Observer               // also observes probe lateness
}

// Start dials endpoint and runs the engine until Stop.
func Start(endpoint string, o Options) (*Agent, error) {
	client, err := cri.Dial(context.Background(), endpoint)
	if err != nil {
		return nil, err
	}
	a := &Agent{Client: client, ProbeRegistry: prometheus.NewRegistry(), AgentRegistry: prometheus.NewRegistry()}
	recorder := o.Recorder
	if recorder == nil {
		recorder = events.NewRing(16)
	}
	cfg := agent.Config{Client: client, Recorder: recorder, Restart: restart.Config{Mode: restart.Recreate},
		ProbeRegistry: a.ProbeRegistry, AgentRegistry: a.AgentRegistry, Prober: prober.Config{Lateness: o.Lateness}}
	if a.Agent, err = agent.New(context.Background(), cfg); err != nil {
		client.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.wg.Go(func() { a.Agent.Run(ctx) })
	return a, nil
}

// Stop stops the engine and waits for every goroutine it started.
func (a *Agent) Stop() {
	a.cancel()
	a.wg.Wait()
	a.Client.Close()
}

// CounterSum adds up every series of a counter family in reg.
func CounterSum(reg prometheus.Gatherer, name string) (float64, error) {
	families, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total, nil
}

// WriteSection replaces the generated section name of the markdown file at
// path: the text between "<!-- name:begin … -->" and "<!-- name:end -->".
func WriteSection(path, name, body string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(raw)
	beginTag, endTag := "<!-- "+name+":begin", "<!-- "+name+":end -->"
	begin := strings.Index(doc, beginTag)
	end := strings.Index(doc, endTag)
	if begin < 0 || end < begin {
		return fmt.Errorf("%s: no generated section %q (%s … -->, %s)", path, name, beginTag, endTag)
	}
	afterBegin := begin + strings.Index(doc[begin:], "-->") + len("-->")
	doc = doc[:afterBegin] + "\n" + body + doc[end:]
	return os.WriteFile(path, []byte(doc), 0o644)
}

// ServeOnAll listens on one free port on every host (the same port on
// each) and serves each listener on its own goroutine until the test ends.
// Spreading pods over loopback addresses keeps a connection per probe from
// exhausting one address pair's ephemeral ports.
func ServeOnAll(tb testing.TB, hosts []string, serve func(net.Listener)) (port int) {
	tb.Helper()
	first, err := net.Listen("tcp", net.JoinHostPort(hosts[0], "0"))
	if err != nil {
		tb.Fatalf("listen on %s: %v", hosts[0], err)
	}
	port = first.Addr().(*net.TCPAddr).Port
	listeners := []net.Listener{first}
	for _, h := range hosts[1:] {
		l, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(port)))
		if err != nil {
			tb.Fatalf("bind port %d on every address: %v", port, err)
		}
		listeners = append(listeners, l)
	}
	for _, l := range listeners {
		tb.Cleanup(func() { l.Close() })
		go serve(l)
	}
	return port
}

// RSSMiB is this process's resident set size.
func RSSMiB() float64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// AcceptAndClose serves a TCP probe target: every connection is accepted
// and closed, until the listener is.
func AcceptAndClose(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
