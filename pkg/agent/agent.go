// Package agent wires the engine once, for `cri-prober run`, `play`,
// `wait` and the test harnesses, from one Config that the commands fill
// from their flags: the poller (and containerd's event stream) feeds the
// resolver, whose views drive the restarter (kubelet's pod sync), which
// publishes the pods' status that the prober's manager and the outputs
// read (without a restarter, they read the resolver's views). What is
// attached to the engine is made here too: the state kept under the state
// directory (restart ledger, readiness gates, kill pause), the transition
// hooks, the state API and the systemd notifier.
//
//	cri.Poller ──► pods.Resolver ──► restart.Restarter ──► status ──► prober.Manager (workers) ──► results.Store
//	                                        ▲                                                        │
//	                                        └──────── liveness and startup failures ─────────────────┘
package agent

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/exec"
	"github.com/cri-prober/cri-prober/pkg/hooks"
	"github.com/cri-prober/cri-prober/pkg/killbudget"
	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/lifecycle"
	"github.com/cri-prober/cri-prober/pkg/manifests"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
	"github.com/cri-prober/cri-prober/pkg/podfs"
	"github.com/cri-prober/cri-prober/pkg/podmaker"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Config is what the engine is made of: each setting has one field here
// (the commands turn their flags into it, checked first). Zero values are
// the defaults.
type Config struct {
	// Client reaches the runtime; the caller closes it after Run.
	Client *cri.Client
	// RelistPeriod is how often the runtime is listed.
	RelistPeriod time.Duration
	// CRIMetrics are the client's series (cri.NewMetrics), also given the
	// poller's (nil: none).
	CRIMetrics *cri.Metrics
	// EventsAddress is containerd's socket for its event stream ("":
	// exits are seen at the next relist).
	EventsAddress string
	// Manifests is a Pod manifest source (nil: annotations only).
	Manifests *manifests.Dir
	// ManifestInterval is how often Manifests (and a static pod directory
	// in StaticPods) is re-read (0: it is not).
	ManifestInterval time.Duration
	// StaticPods are the pods the agent makes, as kubelet makes static
	// pods (nil: none): a static pod directory (a *manifests.Dir read as
	// static pods, re-read every ManifestInterval) or play's files.
	StaticPods pods.StaticSource
	// Node is the node as the pods the agent makes see it (node.Discover):
	// their names, directories, DNS and resources.
	Node podconfig.Node
	// NodeName is the node's name (--node-name): who reports every event
	// (events.k8s.io/v1's reportingInstance), and the node of each restart
	// and of the API's series ("": events are not marked).
	NodeName string
	// SourceOf names what a static pod was made from in its pod record
	// (podfs.Record.Source), and MatchRecord says which pod records are
	// this agent's (the agent and play keep theirs apart under one root
	// directory); nil: the pod's manifest file, and every record.
	SourceOf    func(*pods.Pod) string
	MatchRecord func(podfs.Record) bool
	// HostIP is probed for host-network pods; ProbeNetwork is where
	// network probes are dialled from for pods that do not say.
	HostIP       string
	ProbeNetwork string
	// IgnoreAnnotations leaves CRI annotations out as a spec source
	// (--spec-sources=manifests).
	IgnoreAnnotations bool
	// AnnotationProbeHosts says which hosts annotation probes may name
	// (--annotation-probe-hosts; "": spec.AnnotationProbeHostsPod, none).
	AnnotationProbeHosts string
	// MaxExecPerPod bounds the exec probes of one pod run at once (0: no
	// limit, kubelet's way).
	MaxExecPerPod int
	// MaxProbesInFlight bounds the network probes running at once
	// (--max-probes-in-flight; 0: no bound).
	MaxProbesInFlight int
	// AllowedDestinations are the refused destinations probes may reach
	// nonetheless (--allow-probe-destination).
	AllowedDestinations []netip.Prefix
	// FailureEvents is the event of a probe failure ("": kubelet's).
	FailureEvents prober.FailureEvents
	// KeepSuccessOutput keeps what passing probes print.
	KeepSuccessOutput bool
	// PodFilter says which pods are probed (nil: every pod).
	PodFilter func(namespace, name string) bool
	// NoStartupJitter starts each probe without kubelet's random delay
	// (the commands that wait on a result).
	NoStartupJitter bool
	// Lateness also observes each probe's lateness (nil: none).
	Lateness prometheus.Observer
	// StateDir keeps what must survive the agent's restart: the restart
	// ledger, the readiness gates, the probes' state, the kill pause
	// (--state-dir; "": nothing kept).
	StateDir string
	// Restart is what the restarter does; "" runs none (wait).
	Restart restart.Mode
	// NotReadyOnExit shows, beyond kubelet, a container not ready from the
	// exit of an instance the pod sync kills to restart it, instead of
	// running and ready until its replacement's postStart ended
	// (restart.WithNotReadyOnExit; --not-ready-on-exit).
	NotReadyOnExit bool
	// MaxContainerRestartPeriod and SyncFrequency are kubelet's settings
	// of pod sync (0: kubelet's defaults).
	MaxContainerRestartPeriod, SyncFrequency time.Duration
	// KillBudget bounds probe-triggered kills (zero: no budget).
	KillBudget killbudget.Config
	// OnTransition is a shell command and Webhook a URL told of every
	// transition (--on-transition, --webhook; "": none).
	OnTransition, Webhook string
	// Recorder receives every event (nil: logged).
	Recorder interface{ Record(events.Event) }
	// ProbeRegistry gets kubelet's probe series, AgentRegistry the agent's
	// own; the API shows both (nil: not exported).
	ProbeRegistry, AgentRegistry *prometheus.Registry
	// ProbeMetrics is how kubelet's probe series are kept (--probe-metrics;
	// "": prober.PerProbeMetrics).
	ProbeMetrics prober.ProbeMetrics
	// API serves the state API and metrics (nil: none).
	API *APIConfig
	// NotifySystemd tells systemd when the agent is ready and, with its
	// watchdog, alive (without $NOTIFY_SOCKET: nothing).
	NotifySystemd bool

	// TestProberOptions and TestRestartOptions are for tests only: knobs
	// no command sets (a shorter back-off, a clock).
	TestProberOptions  []prober.Option
	TestRestartOptions []restart.Option
}

// APIConfig is how the state API is served.
type APIConfig struct {
	// Serve is where and how: the --listen address, allowed hosts, web
	// configuration and connection cap.
	Serve api.ServeConfig
	// Systemd serves on the sockets systemd passes instead of Serve.Address.
	Systemd bool
	// Retry is how long after a failed bind the address is tried again
	// (0: 5 s).
	Retry time.Duration
	// MaxEventStreams bounds the event streams served at once.
	MaxEventStreams int
	// Profiling serves Go's profiles.
	Profiling bool
	// KubeStateNamespaces are the namespaces /metrics/kube-state covers
	// (nil: all).
	KubeStateNamespaces []string
}

// Agent is the running engine.
type Agent struct {
	Poller    *cri.Poller
	Resolver  *pods.Resolver
	Manager   *prober.Manager
	Restarter *restart.Restarter // nil without Config.Restart
	// KillBudget is the restart budget and pause that pod sync spends,
	// the prober asks and the API changes (nil without Config.Restart).
	KillBudget *killbudget.Budget
	Store      *results.Store
	Histories  *results.Histories
	Gates      *pods.GateStore
	Ledger     *ledger.Ledger // nil without Config.StateDir or Config.API

	cfg       Config
	recorder  interface{ Record(events.Event) }
	hooks     *hooks.Hooks
	ring      *events.Ring
	listeners *apiListeners
	live      loopCheck
	watcher   *cri.EventWatcher
	criSub    *cri.Subscription
	subs      []*pods.Subscription
	runFuncs  []func(context.Context)
}

// New builds the engine and everything attached to it (the state kept
// under Config.StateDir, the hooks, the state API, the systemd notifier).
// Its subscriptions are made here, before anything runs, so that every
// part sees the first relist. Config's values are checked by the command
// that made it; an error here is the world's (a state directory, a
// socket), said with the flag it comes from.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	a := &Agent{cfg: cfg, Store: results.NewStore(), Histories: results.NewHistories()}
	if err := a.openState(ctx); err != nil {
		return nil, err
	}
	a.recorder = a.events(ctx)
	popts := []cri.PollerOption{}
	if cfg.CRIMetrics != nil {
		popts = append(popts, cri.WithPollerMetrics(cfg.CRIMetrics))
	}
	if cfg.RelistPeriod > 0 {
		popts = append(popts, cri.WithRelistPeriod(cfg.RelistPeriod))
	}
	var err error
	if a.Poller, err = cri.NewPoller(cfg.Client, popts...); err != nil {
		return nil, err
	}
	if cfg.EventsAddress != "" {
		if a.watcher, err = cri.NewEventWatcher(cfg.EventsAddress, a.Poller); err != nil {
			return nil, err
		}
	}
	ropts := []pods.Option{pods.WithProbeNetwork(cfg.ProbeNetwork)}
	if cfg.IgnoreAnnotations {
		ropts = append(ropts, pods.WithoutAnnotations())
	}
	if cfg.AnnotationProbeHosts != "" {
		ropts = append(ropts, pods.WithAnnotationProbeHosts(cfg.AnnotationProbeHosts))
	}
	if cfg.HostIP != "" {
		ropts = append(ropts, pods.WithHostIP(cfg.HostIP))
	}
	if cfg.Manifests != nil {
		ropts = append(ropts, pods.WithManifests(cfg.Manifests))
	}
	if a.recorder != nil {
		ropts = append(ropts, pods.WithRecorder(a.recorder))
	}
	var maker *podmaker.Maker
	if cfg.StaticPods != nil {
		if cfg.Restart != restart.Recreate {
			return nil, fmt.Errorf("pods the agent makes need --restart=%s (the agent is their kubelet)", restart.Recreate)
		}
		if maker, err = newMaker(cfg, a.recorder); err != nil {
			return nil, err
		}
		ropts = append(ropts, pods.WithStaticPods(cfg.StaticPods, maker))
	}
	a.Resolver = pods.NewResolver(ropts...)

	var eopts []exec.Option
	if cfg.MaxExecPerPod > 0 {
		eopts = append(eopts, exec.WithPerPodConcurrency(cfg.MaxExecPerPod))
	}
	if cfg.AgentRegistry != nil {
		eopts = append(eopts, exec.WithRegisterer(cfg.AgentRegistry))
	}
	runner, err := exec.NewRunner(cfg.Client, eopts...)
	if err != nil {
		return nil, fmt.Errorf("exec runner: %w", err)
	}
	mopts := []prober.Option{prober.WithHistories(a.Histories)}
	if a.recorder != nil {
		mopts = append(mopts, prober.WithRecorder(a.recorder))
	}
	if cfg.ProbeMetrics != "" { // before the registerers
		mopts = append(mopts, prober.WithProbeMetrics(cfg.ProbeMetrics))
	}
	if cfg.ProbeRegistry != nil && cfg.AgentRegistry != nil {
		mopts = append(mopts, prober.WithRegisterers(cfg.ProbeRegistry, cfg.AgentRegistry))
	}
	if cfg.Restart != "" {
		bopts := []killbudget.Option{killbudget.WithRecorder(a.recorder)}
		if cfg.AgentRegistry != nil {
			bopts = append(bopts, killbudget.WithRegisterer(cfg.AgentRegistry))
		}
		if a.KillBudget, err = killbudget.New(cfg.KillBudget, cfg.StateDir, bopts...); err != nil {
			return nil, fmt.Errorf("--state-dir: %w", err)
		}
		// A failed container whose kill waits (restart budget, pause) is
		// probed on.
		mopts = append(mopts, prober.WithKillWaits(a.KillBudget.Waits))
	}
	mopts = append(mopts, proberPolicy(cfg)...)
	if a.Manager, err = prober.NewManager(runner, a.Store, append(mopts, cfg.TestProberOptions...)...); err != nil {
		return nil, err
	}
	if cfg.Restart != "" {
		ropts := []restart.Option{restart.WithMode(cfg.Restart), restart.WithHistories(a.Histories), restart.WithRelister(a.Poller),
			restart.WithLedger(a.Ledger)}
		if maker != nil {
			ropts = append(ropts, restart.WithMaker(maker))
		}
		if cfg.NotReadyOnExit {
			ropts = append(ropts, restart.WithNotReadyOnExit())
		}
		if a.recorder != nil {
			ropts = append(ropts, restart.WithRecorder(a.recorder))
		}
		if cfg.AgentRegistry != nil {
			ropts = append(ropts, restart.WithRegisterer(cfg.AgentRegistry))
		}
		if cfg.MaxContainerRestartPeriod > 0 {
			ropts = append(ropts, restart.WithMaxContainerRestartPeriod(cfg.MaxContainerRestartPeriod))
		}
		if cfg.SyncFrequency > 0 {
			ropts = append(ropts, restart.WithSyncFrequency(cfg.SyncFrequency))
		}
		ropts = append(ropts, restart.WithKillBudget(a.KillBudget))
		if a.Restarter, err = restart.New(cfg.Client, lifecycle.NewRunner(cfg.Client), a.Store, append(ropts, cfg.TestRestartOptions...)...); err != nil {
			return nil, err
		}
	}

	a.criSub = a.Poller.Watch()
	a.runFuncs = append(a.runFuncs, a.Poller.Run, func(ctx context.Context) { a.Resolver.Run(ctx, a.criSub) })
	var managerSub *pods.Subscription
	if a.Restarter != nil {
		restarterSub := a.Resolver.Subscribe()
		managerSub = a.Restarter.Subscribe()
		a.subs = append(a.subs, restarterSub)
		a.runFuncs = append(a.runFuncs, func(ctx context.Context) { a.Restarter.Run(ctx, restarterSub) })
	} else {
		managerSub = a.Resolver.Subscribe()
	}
	a.subs = append(a.subs, managerSub)
	a.runFuncs = append(a.runFuncs, func(ctx context.Context) { a.Manager.Run(ctx, managerSub) })
	if a.watcher != nil {
		a.runFuncs = append(a.runFuncs, a.watcher.Run)
	}
	if cfg.Manifests != nil && cfg.ManifestInterval > 0 {
		a.runFuncs = append(a.runFuncs, func(ctx context.Context) { cfg.Manifests.Run(ctx, cfg.ManifestInterval) })
	}
	if dir, ok := cfg.StaticPods.(*manifests.Dir); ok && cfg.ManifestInterval > 0 {
		a.runFuncs = append(a.runFuncs, func(ctx context.Context) { dir.Run(ctx, cfg.ManifestInterval) })
	}
	if a.hooks != nil {
		a.runFuncs = append(a.runFuncs, a.hooks.Run)
	}
	// A relist makes up to 3 CRI calls, each bounded by the request
	// timeout: a loop that has not finished one in that long is stuck.
	relistPeriod := cfg.RelistPeriod
	if relistPeriod <= 0 {
		relistPeriod = cri.DefaultRelistPeriod
	}
	a.live = loopCheck{lastRelist: a.Poller.LastRelist, start: time.Now(), alive: relistPeriod + 3*cfg.Client.RequestTimeout() + time.Minute, now: time.Now}
	if cfg.API != nil {
		if err := a.serveAPI(*cfg.API); err != nil {
			return nil, err
		}
		a.runFuncs = append(a.runFuncs, a.listeners.run)
	}
	if cfg.NotifySystemd {
		notifier := systemdNotifier{ready: a.Health, live: a.live.err}
		a.runFuncs = append(a.runFuncs, notifier.run)
	}
	return a, nil
}

// proberPolicy is where probes may go and what is kept of their answers,
// and how they are scheduled.
func proberPolicy(cfg Config) []prober.Option {
	opts := []prober.Option{prober.WithAllowedDestinations(cfg.AllowedDestinations)}
	if cfg.FailureEvents != "" && cfg.FailureEvents != prober.FailureEventsKubelet {
		opts = append(opts, prober.WithFailureEvents(cfg.FailureEvents))
	}
	if cfg.KeepSuccessOutput {
		opts = append(opts, prober.WithSuccessOutput())
	}
	if cfg.StateDir != "" {
		opts = append(opts, prober.WithStateDir(cfg.StateDir))
	}
	if cfg.MaxProbesInFlight != 0 {
		opts = append(opts, prober.WithMaxProbesInFlight(cfg.MaxProbesInFlight))
	}
	if cfg.PodFilter != nil {
		opts = append(opts, prober.WithPodFilter(cfg.PodFilter))
	}
	if cfg.NoStartupJitter {
		opts = append(opts, prober.WithoutStartupJitter())
	}
	if cfg.Lateness != nil {
		opts = append(opts, prober.WithLatenessObserver(cfg.Lateness))
	}
	return opts
}

// newMaker makes the pods of cfg.StaticPods on the node's directories, with
// the runtime's image service.
func newMaker(cfg Config, recorder restart.Recorder) (*podmaker.Maker, error) {
	fs, err := podfs.New(podfs.Config{Node: cfg.Node})
	if err != nil {
		return nil, fmt.Errorf("the pods' root directory: %w", err)
	}
	sourceOf := cfg.SourceOf
	if sourceOf == nil {
		sourceOf = manifestFile
	}
	if recorder == nil {
		recorder = events.Log(klog.Background())
	}
	return podmaker.New(fs, cfg.Client, recorder, nil, sourceOf, cfg.MatchRecord), nil
}

// manifestFile is the file a pod's manifest came from.
func manifestFile(p *pods.Pod) string {
	if p.Manifest == nil {
		return ""
	}
	return p.Manifest.File
}

// Run runs the engine until ctx is done, then stops every part and waits
// for it.
func (a *Agent) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, run := range a.runFuncs {
		wg.Go(func() { run(ctx) })
	}
	wg.Wait()
	a.criSub.Close()
	for _, s := range a.subs {
		s.Close()
	}
}

// Status returns the pods' status as the agent shows it: as the pod sync
// publishes it (the resolver's latest view, with nothing added, without a
// restarter).
func (a *Agent) Status() *pods.Status {
	if a.Restarter != nil {
		return a.Restarter.Status()
	}
	return a.Resolver.Status()
}

// View returns the pods as the agent shows them: the view of their status.
func (a *Agent) View() *pods.View { return a.Status().View }

// Report describes every pod with its probes' results.
func (a *Agent) Report() []pods.PodReport { return pods.Report(a.Status(), a.Store, a.Gates.Gates()) }

// The state API makes its pod list once per state the agent reports.
var _ api.Versioned = (*Agent)(nil)

// ReportVersion says what Report would show: the pods' status, and the
// store's versions (results.Store.Versions), the gates' version added to
// the results' (both only grow: the sum changes whenever either does).
func (a *Agent) ReportVersion() (status *pods.Status, results, observations uint64) {
	results, observations = a.Store.Versions()
	return a.Status(), results + a.Gates.Version(), observations
}

// ReportPod describes the pod a namespace and name stand for
// (pods.View.ByName).
func (a *Agent) ReportPod(namespace, name string) (pods.PodReport, bool) {
	st := a.Status()
	p, ok := st.ByName(namespace, name)
	if !ok {
		return pods.PodReport{}, false
	}
	return pods.ReportPod(p, st.For(p.Key), a.Store, a.Gates.Gates()), true
}

// Health returns nil while the runtime answers, else why not.
func (a *Agent) Health() error {
	if at, err := a.Poller.LastError(); err != nil {
		return fmt.Errorf("runtime unreachable since %s: %v", at.Format(time.RFC3339), err)
	}
	if a.Poller.Snapshot() == nil {
		return fmt.Errorf("no relist has succeeded yet")
	}
	return nil
}

// PodSet is a set of static pods that its holder changes (play's files):
// a pods.StaticSource.
type PodSet struct {
	mu      sync.Mutex
	pods    []*spec.Pod
	changed chan struct{}
}

// NewPodSet returns an empty set.
func NewPodSet() *PodSet { return &PodSet{changed: make(chan struct{}, 1)} }

// Set replaces the pods: the agent makes the new ones and removes the
// ones left out, as kubelet does for a static pod path's files.
func (s *PodSet) Set(list []*spec.Pod) {
	s.mu.Lock()
	s.pods = list
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Pods returns the pods (pods.StaticSource).
func (s *PodSet) Pods() ([]*spec.Pod, []*spec.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods, nil
}

// Changed is signalled after Set.
func (s *PodSet) Changed() <-chan struct{} { return s.changed }
