// Package api serves the agent's state over HTTP: the agent's own health,
// every pod and container with its probes, a readiness endpoint per pod
// for load balancers, recent events (listed or streamed), metrics, and a
// live status page at / for people.
// Serve serves it as a Prometheus exporter is served (TLS and basic auth
// from a web configuration file), within limits no client can exceed
// (connections, event streams, timeouts), and only to requests that name
// the agent in their Host header.
//
// It sits beside cmd at the top of the dependency order: it reads the
// agent's view of the pods (with the probes' results), the probes'
// histories, the restarter's waiting state and ledger, and the event ring.
// Its routes are declared once (routes.go), for the server and for Client,
// the typed client every command asks an agent with.
package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/bounded"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Reporter gives the pods as the agent sees them. ReportPod answers for
// the pod a namespace and name stand for (pods.View.ByName).
type Reporter interface {
	Report() []pods.PodReport
	ReportPod(namespace, name string) (pods.PodReport, bool)
}

// Historian gives a pod's recent probe runs (by its key, pods.Pod.Key).
type Historian interface {
	For(podKey string) []results.ProbeHistory
}

// Ledger gives a pod's restarts and why (by namespace and name).
type Ledger interface {
	For(namespace, pod string) []ledger.Entry
	Newest(n int, keep func(namespace, pod string) bool) []ledger.Entry
}

// Server serves the state API.
type Server struct {
	pods      Reporter
	history   Historian
	ledger    Ledger
	gates     Gater
	events    *events.Ring
	health    func() error
	live      func() error
	metrics   http.Handler
	probes    http.Handler
	kubeState http.Handler
	node      string
	profiling bool
	keepWarm  time.Duration
	clock     clock.PassiveClock // the status page's ages
	charts    chartCache         // the status page's charts, as last drawn

	// streams holds a token per event stream being served: a stream is
	// a connection held open for as long as the client likes, so they
	// are counted apart from (and capped below) the connections.
	streams            chan struct{}
	streamWriteTimeout time.Duration
	m                  *metrics

	// busy holds a token per expensive request being served (bounded).
	busy    chan struct{}
	podList podListCache
	kills   KillController // nil: no restarter
	// nodeReport says what the agent keeps on the node (nil: nothing).
	nodeReport NodeReporter
}

// Config holds what the server reads from. Health returns nil while the
// agent works (the runtime reachable), else why not.
type Config struct {
	Pods    Reporter
	History Historian // nil: no history endpoint
	Ledger  Ledger    // nil: no restarts endpoint
	// Gates sets pods' readiness gates (nil: no gate endpoints). Its
	// changes are served only to clients the agent can name (a unix
	// socket's peer, basic auth or a client certificate checked by the
	// web configuration), and audited in events.
	Gates  Gater
	Events *events.Ring
	Health func() error
	// Live is /livez: nil while the agent works, whatever the runtime's
	// state (a liveness check that restarts the agent must not fire while
	// containerd is down: the agent reconnects by itself). nil: always ok.
	Live         func() error
	Metrics      http.Handler // /metrics
	ProbeMetrics http.Handler // /metrics/probes
	// KubeStateMetrics is /metrics/kube-state: kube-state-metrics' pod
	// series (KubeState).
	KubeStateMetrics http.Handler
	// NodeName is the node's name, on every pod of /api/v1/pods.
	NodeName string
	// Profiling serves Go's profiles under /debug/pprof/ (net/http/pprof),
	// as Kubernetes components do with --profiling, but only to a client
	// the agent can name, the same rule as for changes (mutating): a unix
	// socket's peer (0600), or a basic auth user or verified client
	// certificate checked by the web configuration; TLS alone names no
	// one. A loopback port is any local user's, and a web page's (a
	// profile or a 25 s trace is a GET an <img> can send). The command
	// line is never served: it may hold a --webhook token that the unit
	// hides from other users.
	Profiling bool

	// Registerer gets the API's own metrics (cri_prober_api_…); nil: they
	// are kept but not exported.
	Registerer prometheus.Registerer
	// MaxEventStreams caps the event streams (/api/v1/events?watch=1)
	// served at once; beyond it a client gets 503 with Retry-After. 0:
	// DefaultMaxEventStreams.
	MaxEventStreams int
	// Kills is the restart budget and pause (nil: no /api/v1/kills).
	Kills KillController
	// Node says what the agent keeps on the node: disk pressure, the
	// image filesystem, container logs, what was reclaimed (nil: no
	// /api/v1/node, and no node section on the status page).
	Node NodeReporter
	// StreamWriteTimeout bounds each write to an event stream: a client
	// that stops reading is dropped once the socket's buffers are full
	// for that long. 0: DefaultStreamWriteTimeout.
	StreamWriteTimeout time.Duration
}

// New returns a server for cfg. It panics if cfg.Registerer already has
// the API's metrics (one server per registry).
func New(cfg Config) *Server {
	maxStreams := cfg.MaxEventStreams
	if maxStreams <= 0 {
		maxStreams = DefaultMaxEventStreams
	}
	writeTimeout := cfg.StreamWriteTimeout
	if writeTimeout <= 0 {
		writeTimeout = DefaultStreamWriteTimeout
	}
	return &Server{pods: cfg.Pods, history: cfg.History, ledger: cfg.Ledger, gates: cfg.Gates, events: cfg.Events, health: cfg.Health, live: cfg.Live,
		metrics: cfg.Metrics, probes: cfg.ProbeMetrics, kubeState: cfg.KubeStateMetrics, node: cfg.NodeName, profiling: cfg.Profiling, keepWarm: 15 * time.Second, clock: clock.RealClock{},
		streams: make(chan struct{}, maxStreams), streamWriteTimeout: writeTimeout, m: newMetrics(cfg.Registerer),
		busy: make(chan struct{}, MaxBusyRequests), kills: cfg.Kills, nodeReport: cfg.Node}
}

// Handler routes the API.
func (s *Server) Handler() http.Handler { return s.routes("") }

// routes is the API; webConfigFile is the web configuration it is served
// with ("": none), which with the connection says who may change the
// agent's state (gates, pause, resume: mutating) and read its profiles
// (Config.Profiling).
func (s *Server) routes(webConfigFile string) http.Handler {
	mux := http.NewServeMux()
	// What builds or writes much (megabytes for hundreds of pods) is
	// bounded: a flood of it from any local client must not take the CPU
	// the probes need. /metrics is bounded by promhttp's own limit.
	mux.HandleFunc("GET /{$}", s.bounded(s.statusPage))
	mux.HandleFunc("GET /ui/{file}", serveStatic)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /livez", s.livez)
	mux.HandleFunc("GET "+PathPods, s.bounded(s.listPods))
	mux.HandleFunc("GET "+routePod, s.getPod)
	mux.HandleFunc("GET "+routeReady, s.ready)
	if s.history != nil {
		mux.HandleFunc("GET "+routeHistory, s.bounded(s.getHistory))
	}
	if s.ledger != nil {
		mux.HandleFunc("GET "+routeRestarts, s.bounded(s.getRestarts))
	}
	mux.HandleFunc("GET "+PathEvents, s.listEvents)
	if s.kills != nil {
		mux.HandleFunc("GET "+PathKills, s.getKills)
		mux.HandleFunc("POST "+PathKillsPause, mutating(webConfigFile, s.changeKills(true)))
		mux.HandleFunc("POST "+PathKillsResume, mutating(webConfigFile, s.changeKills(false)))
	}
	if s.nodeReport != nil {
		mux.HandleFunc("GET "+PathNode, s.getNode)
	}
	if s.gates != nil {
		mux.HandleFunc("GET "+PathGates, s.listGates)
		mux.HandleFunc("PUT "+routeGate, mutating(webConfigFile, s.setGate))
		mux.HandleFunc("DELETE "+routeGate, mutating(webConfigFile, s.unsetGate))
	}
	if s.metrics != nil {
		mux.Handle("GET /metrics", s.metrics)
	}
	if s.probes != nil {
		mux.Handle("GET /metrics/probes", s.probes)
	}
	if s.kubeState != nil {
		mux.HandleFunc("GET /metrics/kube-state", s.bounded(s.kubeState.ServeHTTP))
	}
	if s.profiling {
		mux.HandleFunc("GET /debug/pprof/", named(webConfigFile, pprof.Index))
		mux.HandleFunc("GET /debug/pprof/profile", named(webConfigFile, pprof.Profile))
		mux.HandleFunc("GET /debug/pprof/symbol", named(webConfigFile, pprof.Symbol))
		mux.HandleFunc("GET /debug/pprof/trace", named(webConfigFile, pprof.Trace))
	}
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v) //nolint:errcheck // the client went away
}

// livez answers whether the agent itself works (Config.Live), as
// Kubernetes components' /livez: for liveness checks, where /healthz (the
// runtime reachable) is for readiness.
func (s *Server) livez(w http.ResponseWriter, _ *http.Request) {
	if s.live != nil {
		if err := s.live(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	fmt.Fprintln(w, "ok")
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	if err := s.health(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// PodList is GET /api/v1/pods.
type PodList struct {
	// RuntimeError says why the runtime cannot be reached, while it cannot:
	// the pods are then as last seen and nothing is restarted.
	RuntimeError string `json:"runtimeError,omitempty"`
	Pods         []Pod  `json:"pods"`
}

// Pod is one pod: the runtime's view, its readiness and probes, and
// kubelet's status of it (phase, reason, startTime, conditions).
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Node is the node's name (run --node-name), as spec.nodeName.
	Node      string `json:"node,omitempty"`
	SandboxID string `json:"sandboxId"`
	IP        string `json:"ip"`
	Phase     string `json:"phase"`
	// Reason and Message say why the pod failed as a whole (kubelet's
	// status.reason: DeadlineExceeded).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Ready is kubelet's Ready condition.
	Ready     bool       `json:"ready"`
	CreatedAt time.Time  `json:"createdAt"`
	StartTime *time.Time `json:"startTime,omitempty"`
	// Terminating: the pod is being torn down (kubelet's deletion
	// timestamp is set).
	Terminating bool `json:"terminating,omitempty"`
	// ReadinessGates are the condition types of the spec's
	// readinessGates.
	ReadinessGates []string `json:"readinessGates,omitempty"`
	// Conditions are those set with `cri-prober gate set`, then
	// kubelet's, in its order: PodReadyToStartContainers, Initialized,
	// Ready, ContainersReady, PodScheduled.
	Conditions []Condition `json:"conditions"`
	Source     string      `json:"source,omitempty"`
	Problems   []string    `json:"problems,omitempty"`
	Containers []Container `json:"containers"`
}

// Condition is a pod condition as kubectl shows one (v1.PodCondition).
// lastTransitionTime is when the agent knows it became so (the runtime's
// time of what it rests on; pods.Condition); null when unknown.
type Condition struct {
	Type               string     `json:"type"`
	Status             string     `json:"status"`
	Reason             string     `json:"reason,omitempty"`
	Message            string     `json:"message,omitempty"`
	LastTransitionTime *time.Time `json:"lastTransitionTime"`
}

// Container is one container's newest instance.
type Container struct {
	Name string `json:"name"`
	// Kind is init or sidecar for init containers (omitted for regular
	// ones).
	Kind    string `json:"kind,omitempty"`
	ID      string `json:"id"`
	Attempt uint32 `json:"attempt"`
	// State is the current instance's CRI state (Created, Running,
	// Exited), Waiting before any instance exists, or why it waits
	// (CrashLoopBackOff); Reason says how an exited one ended: Completed
	// (exit 0) or Error.
	State     string     `json:"state"`
	Reason    string     `json:"reason,omitempty"`
	ExitCode  int32      `json:"exitCode,omitempty"`
	StartedAt *time.Time `json:"startedAt"`
	Ready     bool       `json:"ready"`
	Started   bool       `json:"started"`
	// RestartCount is kubelet's: its annotation on the current instance
	// when kubelet made it, else the attempt.
	RestartCount int32            `json:"restartCount"`
	WaitingUntil *time.Time       `json:"waitingUntil,omitempty"`
	Probes       map[string]Probe `json:"probes"`
	Problems     []string         `json:"problems,omitempty"`
	// Warnings say what of the container's spec is inert (a probe naming
	// an undeclared port errors at every run, as under kubelet).
	Warnings []string `json:"warnings,omitempty"`
	// Status is the container's state and last state as kubectl shows
	// them (an entry of status.containerStatuses, its state and
	// lastState); State and Reason above are the older summary.
	Status ContainerStatus `json:"status"`
}

// ContainerStatus is kubelet's state and last termination state of a
// container (v1.ContainerStatus's state and lastState).
type ContainerStatus struct {
	State     ContainerState `json:"state"`
	LastState ContainerState `json:"lastState"`
}

// ContainerState is v1.ContainerState: one of waiting, running and
// terminated (lastState: none, or one).
type ContainerState struct {
	Waiting    *StateWaiting    `json:"waiting,omitempty"`
	Running    *StateRunning    `json:"running,omitempty"`
	Terminated *StateTerminated `json:"terminated,omitempty"`
}

// StateWaiting is why a container is not running: ContainerCreating,
// PodInitializing, CrashLoopBackOff, ErrImagePull… (no reason: created,
// not started).
type StateWaiting struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// StateRunning is a running container's start.
type StateRunning struct {
	StartedAt *time.Time `json:"startedAt"`
}

// StateTerminated is an exit: the runtime's reason (Completed, Error,
// OOMKilled, ContainerCannotRun…) and kubelet's message (the runtime's,
// then the container's termination message).
type StateTerminated struct {
	ExitCode    int32      `json:"exitCode"`
	Reason      string     `json:"reason,omitempty"`
	Message     string     `json:"message,omitempty"`
	StartedAt   *time.Time `json:"startedAt"`
	FinishedAt  *time.Time `json:"finishedAt"`
	ContainerID string     `json:"containerID,omitempty"`
}

// Probe is a probe's last run and its stable result.
type Probe struct {
	// Result is the last run's verdict: success, failure, warning, or
	// unknown (not run yet, or could not run: see Error).
	Result        string     `json:"result"`
	LastProbeTime *time.Time `json:"lastProbeTime"`
	Output        string     `json:"output"`
	Error         string     `json:"error,omitempty"`
	// Consecutive counts the runs in a row with this result; Threshold is
	// how many change the stable result.
	Consecutive int    `json:"consecutive"`
	Threshold   int    `json:"threshold,omitempty"`
	Stable      string `json:"stable"` // Success, Failure or UNKNOWN
}

func (s *Server) snapshot() []Pod {
	reports := s.pods.Report()
	out := make([]Pod, 0, len(reports))
	for _, r := range reports {
		out = append(out, s.pod(r))
	}
	return out
}

func (s *Server) pod(r pods.PodReport) Pod {
	p := PodFromReport(r)
	p.Node = s.node
	return p
}

// PodFromReport is a pod as the API shows it, from the agent's report of
// it; `cri-prober wait` reads its own engine through it, so that it
// judges as it judges an agent's answer.
func PodFromReport(r pods.PodReport) Pod {
	p := Pod{Namespace: r.Namespace, Name: r.Name, UID: r.UID, SandboxID: r.SandboxID, IP: r.IP, Phase: string(r.Phase), Reason: r.Reason,
		Message: r.Message, Ready: r.Ready, CreatedAt: r.CreatedAt, StartTime: timeOrNil(r.StartTime), Terminating: r.Terminating,
		Conditions: []Condition{}, Source: r.Source, Problems: r.Problems, Containers: []Container{}}
	for _, g := range r.ReadinessGates {
		p.ReadinessGates = append(p.ReadinessGates, string(g))
	}
	for _, c := range r.Conditions {
		p.Conditions = append(p.Conditions, Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			LastTransitionTime: timeOrNil(c.LastTransitionTime)})
	}
	for _, c := range r.Containers {
		p.Containers = append(p.Containers, container(c))
	}
	return p
}

// timeOrNil is t for the JSON, null when zero (unknown).
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func containerState(s pods.ContainerState) ContainerState {
	var out ContainerState
	if w := s.Waiting; w != nil {
		out.Waiting = &StateWaiting{Reason: w.Reason, Message: w.Message}
	}
	if r := s.Running; r != nil {
		out.Running = &StateRunning{StartedAt: timeOrNil(r.StartedAt)}
	}
	if t := s.Terminated; t != nil {
		out.Terminated = &StateTerminated{ExitCode: t.ExitCode, Reason: t.Reason, Message: t.Message, StartedAt: timeOrNil(t.StartedAt),
			FinishedAt: timeOrNil(t.FinishedAt), ContainerID: t.ContainerID}
	}
	return out
}

func container(c pods.ContainerReport) Container {
	out := Container{Name: c.Name, ID: c.ID, Attempt: c.Attempt, State: string(c.State), ExitCode: c.ExitCode, Ready: c.Ready, Started: c.Started,
		RestartCount: c.RestartCount, Problems: c.Problems, Warnings: c.Warnings, Probes: map[string]Probe{},
		Status: ContainerStatus{State: containerState(c.Status.State), LastState: containerState(c.Status.LastState)}}
	if c.Kind != spec.Regular {
		out.Kind = c.Kind.String()
	}
	switch {
	case c.ID == "":
		out.State = "Waiting"
	case c.State == cri.StateExited && c.ExitCode == 0:
		out.Reason = "Completed"
	case c.State == cri.StateExited:
		out.Reason = "Error"
	}
	if !c.StartedAt.IsZero() {
		t := c.StartedAt
		out.StartedAt = &t
	}
	if w := c.Waiting; w != nil && c.State != cri.StateRunning {
		out.State = w.Reason
		if !w.Until.IsZero() {
			until := w.Until
			out.WaitingUntil = &until
		}
	}
	for _, pr := range c.Probes {
		p := Probe{Result: string(results.OutcomeUnknown), Stable: pr.Result.String()}
		if o := pr.Last; o != nil {
			t := o.Time
			p.Result, p.LastProbeTime, p.Error = string(o.Outcome), &t, o.Err
			p.Output, p.Consecutive, p.Threshold = bounded.String(o.Output, bounded.Message), o.Consecutive, o.Threshold
		}
		out.Probes[strings.ToLower(pr.Type.String())] = p
	}
	return out
}

func (s *Server) listPods(w http.ResponseWriter, r *http.Request) {
	body := s.podListJSON()
	if pretty(r) {
		var b bytes.Buffer
		if json.Indent(&b, body, "", "  ") == nil {
			body = b.Bytes()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(body) //nolint:errcheck // the client went away
}

// pretty says whether the client asked for indented JSON (?pretty, as the
// Kubernetes API server's): the pod list is compact by default, being
// made once for every client and large.
func pretty(r *http.Request) bool {
	v, ok := r.URL.Query()["pretty"]
	return ok && (len(v) == 0 || (v[0] != "false" && v[0] != "0"))
}

// find returns the pod the request's namespace and name stand for.
func (s *Server) find(r *http.Request) (pods.PodReport, bool) {
	return s.pods.ReportPod(r.PathValue("namespace"), r.PathValue("name"))
}

func (s *Server) getPod(w http.ResponseWriter, r *http.Request) {
	p, ok := s.find(r)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "pod not found"})
		return
	}
	writeJSON(w, http.StatusOK, s.pod(p))
}

// History is GET /api/v1/pods/{namespace}/{name}/history: each probe's
// last runs and, kept apart so that successes never push them out, its
// last failures; oldest first, across the containers' restarts.
type History struct {
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
	Probes    []ProbeHistory `json:"probes"`
}

// ProbeHistory is one probe's runs.
type ProbeHistory struct {
	Container string `json:"container"`
	Type      string `json:"type"` // liveness, readiness or startup
	Recent    []Run  `json:"recent"`
	Failures  []Run  `json:"failures"`
}

// Run is one probe run.
type Run struct {
	Time        time.Time `json:"time"`
	DurationMs  float64   `json:"durationMs"`
	Result      string    `json:"result"` // success, warning, failure, or unknown (see error)
	Output      string    `json:"output,omitempty"`
	Error       string    `json:"error,omitempty"`
	Consecutive int       `json:"consecutive,omitempty"`
	Threshold   int       `json:"threshold,omitempty"`
	// Changed: this run reached the threshold and changed the result.
	Changed     bool   `json:"changed,omitempty"`
	ContainerID string `json:"containerId"`
}

func (s *Server) getHistory(w http.ResponseWriter, r *http.Request) {
	p, ok := s.find(r)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "pod not found"})
		return
	}
	out := History{Namespace: p.Namespace, Name: p.Name, Probes: []ProbeHistory{}}
	for _, h := range s.history.For(p.Key) {
		out.Probes = append(out.Probes, ProbeHistory{Container: h.Container, Type: strings.ToLower(h.Type.String()),
			Recent: runs(h.Recent), Failures: runs(h.Failures)})
	}
	writeJSON(w, http.StatusOK, out)
}

func runs(list []results.Observation) []Run {
	out := make([]Run, 0, len(list))
	for _, o := range list {
		out = append(out, Run{Time: o.Time, DurationMs: float64(o.Duration.Microseconds()) / 1000, Result: string(o.Outcome),
			Output: bounded.String(o.Output, bounded.Message), Error: o.Err, Consecutive: o.Consecutive, Threshold: o.Threshold, Changed: o.Changed, ContainerID: o.ContainerID})
	}
	return out
}

// Restarts is GET /api/v1/pods/{namespace}/{name}/restarts: every restart
// (or stop) of the pod's containers that the agent did, and why, oldest
// first, kept across the agent's restarts with --state-dir.
type Restarts struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Restarts  []Restart `json:"restarts"`
}

func (s *Server) getRestarts(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	entries := s.ledger.For(ns, name)
	out := make([]Restart, 0, len(entries))
	for _, e := range entries {
		r := restartOf(e)
		for i := range r.Failures {
			r.Failures[i].Output = bounded.String(r.Failures[i].Output, bounded.Message) // a workload wrote it
		}
		out = append(out, r)
	}
	writeJSON(w, http.StatusOK, Restarts{Namespace: ns, Name: name, Restarts: out})
}

// Readiness is GET /api/v1/pods/{namespace}/{name}/ready.
type Readiness struct {
	Namespace  string          `json:"namespace"`
	Name       string          `json:"name"`
	Ready      bool            `json:"ready"`
	Containers map[string]bool `json:"containers"`
	// ReadinessGates are the pod's readiness gates, each true when its
	// condition is True (omitted for a pod without).
	ReadinessGates map[string]bool `json:"readinessGates,omitempty"`
}

// ready answers 200 when the pod is ready (kubelet's Ready condition:
// every regular container and sidecar ready, and its readiness gates
// met), else 503: usable as a load balancer's health check for the pod.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	p, ok := s.find(r)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "pod not found"})
		return
	}
	body := Readiness{Namespace: p.Namespace, Name: p.Name, Ready: p.Ready, Containers: map[string]bool{}, ReadinessGates: gateStatuses(p)}
	for _, c := range p.Containers {
		if c.Kind != spec.Init { // init containers never count (kubelet)
			body.Containers[c.Name] = c.Ready
		}
	}
	code := http.StatusOK
	if !p.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, body)
}

// EventList is GET /api/v1/events.
type EventList struct {
	Events []events.Event `json:"events"`
}

// listEvents lists recent events (?since=RFC3339), or with ?watch=1
// streams them as server-sent events: those since `since`, then each new
// one as it happens.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("since=%q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", v)})
			return
		}
		since = t
	}
	if r.URL.Query().Get("watch") == "" {
		s.bounded(func(w http.ResponseWriter, _ *http.Request) {
			list := s.events.Since(since)
			if list == nil {
				list = []events.Event{}
			}
			writeJSON(w, http.StatusOK, EventList{Events: list})
		})(w, r)
		return
	}
	s.watchEvents(w, r, since) // streams are capped apart
}

func (s *Server) watchEvents(w http.ResponseWriter, r *http.Request, since time.Time) {
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		s.m.rejected.WithLabelValues(rejectedStreamLimit).Inc()
		// Closing the connection frees its descriptor now rather than
		// after the idle timeout: a client turned away is likely to be
		// one of many.
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfterSeconds))
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": fmt.Sprintf(
			"too many event streams open (%d, the agent's --web.max-event-streams); retry later, or list the events without ?watch", cap(s.streams))})
		return
	}
	s.m.streams.Inc()
	defer s.m.streams.Dec()

	rc := http.NewResponseController(w)
	// The server's ReadTimeout is for reading the request: lift it, so
	// that whatever the protocol, a stream does not end when it passes
	// (net/http does so itself for HTTP/1.1). A client that goes away is
	// still seen: its connection's read returns EOF.
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	watcher := s.events.Watch(256)
	defer watcher.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	// write sends text and flushes it under a deadline of its own: the
	// server's WriteTimeout is for whole responses, and a client that
	// never reads must not hold its goroutine, buffers and descriptor
	// forever.
	write := func(text string) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(s.streamWriteTimeout)); err != nil {
			return false
		}
		if _, err := io.WriteString(w, text); err != nil {
			s.dropped(err)
			return false
		}
		if err := rc.Flush(); err != nil {
			s.dropped(err)
			return false
		}
		return true
	}
	event := func(e events.Event) string {
		b, _ := json.Marshal(e)
		return "data: " + string(b) + "\n\n"
	}
	if !since.IsZero() {
		for _, e := range s.events.Since(since) { // each under its deadline
			if !write(event(e)) {
				return
			}
		}
	}
	if !write("") { // the headers, if nothing else
		return
	}
	keepWarm := time.NewTicker(s.keepWarm)
	defer keepWarm.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case e := <-watcher.C():
			text := event(e)
			if watcher.Missed() {
				text = ": some events were dropped because this stream fell behind\n\n" + text
			}
			if !write(text) {
				return
			}
		case <-keepWarm.C:
			// A comment keeps proxies from closing an idle stream.
			if !write(": keep-alive\n\n") {
				return
			}
		}
	}
}

// dropped counts a stream ended by its write deadline: the client stopped
// reading (a client that went away is not counted).
func (s *Server) dropped(err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		s.m.dropped.WithLabelValues(droppedSlowStream).Inc()
	}
}
