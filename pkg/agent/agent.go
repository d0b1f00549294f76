// Package agent wires the engine once, for `cri-prober run`, `wait` and
// the test harnesses: the poller (and containerd's event stream) feeds the
// resolver, whose views drive the restarter (kubelet's pod sync), which
// publishes the pods' status that the prober's manager and the outputs
// read (without a restarter, they read the resolver's views).
//
//	cri.Poller ──► pods.Resolver ──► restart.Restarter ──► status ──► prober.Manager (workers) ──► results.Store
//	                                        ▲                                                        │
//	                                        └──────── liveness and startup failures ─────────────────┘
package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/exec"
	"github.com/cri-prober/cri-prober/pkg/lifecycle"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
	"github.com/cri-prober/cri-prober/pkg/podfs"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Config is what the engine is made of. Zero values are the defaults.
type Config struct {
	// Client reaches the runtime; the caller closes it after Run.
	Client *cri.Client
	// RelistPeriod is how often the runtime is listed.
	RelistPeriod time.Duration
	// EventsAddress is containerd's socket for its event stream ("":
	// exits are seen at the next relist).
	EventsAddress string
	// Manifests is a Pod manifest source (nil: annotations only).
	Manifests *spec.ManifestDir
	// ManifestInterval is how often Manifests (and a static pod directory
	// in Owned) is re-read (0: it is not).
	ManifestInterval time.Duration
	// Owned are the pods the agent makes, as kubelet makes static pods
	// (nil: none): a static pod directory (a *spec.ManifestDir read as
	// static pods, re-read every ManifestInterval) or play's files.
	Owned pods.OwnedSource
	// Node is the node as the pods the agent makes see it (podfs.
	// DiscoverNode): their names, directories, DNS and resources.
	Node podconfig.Node
	// OwnedSource names what an owned pod was made from in its record on
	// disk, and Owns says which records are this agent's (the agent and
	// play keep theirs apart under one root directory); nil: the pod's
	// manifest file, and every record.
	OwnedSource func(*pods.Pod) string
	Owns        func(podfs.Owner) bool
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
	// Restart is what the restarter does; "" runs none (wait).
	Restart restart.Mode
	// NotReadyOnExit shows, beyond kubelet, a container not ready from the
	// exit of an instance the pod sync kills to restart it, instead of
	// running and ready until its replacement's postStart ended
	// (restart.WithNotReadyOnExit; --not-ready-on-exit).
	NotReadyOnExit bool
	// Ledger records restarts (nil: none kept).
	Ledger *restart.Ledger
	// Gates are the readiness gates' conditions set through the API
	// (nil: kept in memory).
	Gates *pods.GateStore
	// Recorder receives every event (nil: logged).
	Recorder interface{ Record(events.Event) }
	// ProbeRegisterer gets kubelet's probe series, AgentRegisterer the
	// agent's own (nil: not exported).
	ProbeRegisterer, AgentRegisterer prometheus.Registerer
	// ProbeMetrics is how kubelet's probe series are kept (--probe-metrics;
	// "": prober.PerProbeMetrics).
	ProbeMetrics prober.ProbeMetrics
	// ProberOptions are more options for the manager (state dir, pod
	// filter, jitter, lateness observer).
	ProberOptions []prober.Option
	// RestartOptions are more options for the restarter (back-off, clock).
	RestartOptions []restart.Option
	// PollerOptions are more options for the poller.
	PollerOptions []cri.PollerOption
}

// Agent is the running engine.
type Agent struct {
	Poller    *cri.Poller
	Resolver  *pods.Resolver
	Manager   *prober.Manager
	Restarter *restart.Restarter // nil without Config.Restart
	Store     *results.Store
	Histories *results.Histories
	Gates     *pods.GateStore

	cfg      Config
	watcher  *cri.EventWatcher
	criSub   *cri.Subscription
	subs     []*pods.Subscription
	runFuncs []func(context.Context)
}

// New builds the engine. Its subscriptions are made here, before anything
// runs, so that every part sees the first relist.
func New(cfg Config) (*Agent, error) {
	a := &Agent{cfg: cfg, Store: results.NewStore(), Histories: results.NewHistories(), Gates: cfg.Gates}
	if a.Gates == nil {
		a.Gates = pods.NewGateStore(nil)
	}
	popts := append([]cri.PollerOption(nil), cfg.PollerOptions...)
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
	if cfg.Recorder != nil {
		ropts = append(ropts, pods.WithRecorder(cfg.Recorder))
	}
	var maker *restart.PodMaker
	if cfg.Owned != nil {
		if cfg.Restart != restart.Recreate {
			return nil, fmt.Errorf("pods the agent makes need --restart=%s (the agent is their kubelet)", restart.Recreate)
		}
		if maker, err = newMaker(cfg); err != nil {
			return nil, err
		}
		ropts = append(ropts, pods.WithOwned(cfg.Owned, maker))
	}
	a.Resolver = pods.NewResolver(append(ropts, pods.WithResults(a.Store))...)

	var eopts []exec.Option
	if cfg.MaxExecPerPod > 0 {
		eopts = append(eopts, exec.WithPerPodConcurrency(cfg.MaxExecPerPod))
	}
	if cfg.AgentRegisterer != nil {
		eopts = append(eopts, exec.WithRegisterer(cfg.AgentRegisterer))
	}
	runner, err := exec.NewRunner(cfg.Client, eopts...)
	if err != nil {
		return nil, fmt.Errorf("exec runner: %w", err)
	}
	mopts := []prober.Option{prober.WithHistories(a.Histories)}
	if cfg.Recorder != nil {
		mopts = append(mopts, prober.WithRecorder(cfg.Recorder))
	}
	if cfg.ProbeMetrics != "" { // before the registerers
		mopts = append(mopts, prober.WithProbeMetrics(cfg.ProbeMetrics))
	}
	if cfg.ProbeRegisterer != nil && cfg.AgentRegisterer != nil {
		mopts = append(mopts, prober.WithRegisterers(cfg.ProbeRegisterer, cfg.AgentRegisterer))
	}
	// A failed container whose kill waits (restart budget, pause) is
	// probed on: the restarter is made below, before anything runs.
	mopts = append(mopts, prober.WithKillWaits(func(id string) bool { return a.Restarter != nil && a.Restarter.KillWaits(id) }))
	if a.Manager, err = prober.NewManager(runner, a.Store, append(mopts, cfg.ProberOptions...)...); err != nil {
		return nil, err
	}
	if cfg.Restart != "" {
		ropts := []restart.Option{restart.WithMode(cfg.Restart), restart.WithHistories(a.Histories), restart.WithRelister(a.Poller),
			restart.WithLedger(cfg.Ledger)}
		if maker != nil {
			ropts = append(ropts, restart.WithMaker(maker))
		}
		if cfg.NotReadyOnExit {
			ropts = append(ropts, restart.WithNotReadyOnExit())
		}
		if cfg.Recorder != nil {
			ropts = append(ropts, restart.WithRecorder(cfg.Recorder))
		}
		if cfg.AgentRegisterer != nil {
			ropts = append(ropts, restart.WithRegisterer(cfg.AgentRegisterer))
		}
		if a.Restarter, err = restart.New(cfg.Client, lifecycle.NewRunner(cfg.Client), a.Store, append(ropts, cfg.RestartOptions...)...); err != nil {
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
	if dir, ok := cfg.Owned.(*spec.ManifestDir); ok && cfg.ManifestInterval > 0 {
		a.runFuncs = append(a.runFuncs, func(ctx context.Context) { dir.Run(ctx, cfg.ManifestInterval) })
	}
	return a, nil
}

// newMaker makes the pods of cfg.Owned on the node's directories, with
// the runtime's image service.
func newMaker(cfg Config) (*restart.PodMaker, error) {
	fs, err := podfs.New(podfs.Config{Node: cfg.Node})
	if err != nil {
		return nil, fmt.Errorf("the pods' root directory: %w", err)
	}
	source := cfg.OwnedSource
	if source == nil {
		source = manifestFile
	}
	var rec restart.Recorder = events.Log(klog.Background())
	if cfg.Recorder != nil {
		rec = cfg.Recorder
	}
	return restart.NewMaker(fs, cfg.Client, rec, nil, source, cfg.Owns), nil
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

// View returns the pods as the agent shows them: their status, as the pod
// sync publishes it (the resolver's latest view without a restarter).
func (a *Agent) View() *pods.View {
	if a.Restarter != nil {
		return a.Restarter.Status()
	}
	return a.Resolver.View()
}

// Report describes every pod with its probes' results.
func (a *Agent) Report() []pods.PodReport { return pods.Report(a.View(), a.Store, a.Gates.Gates()) }

// ReportVersion says what Report would show: the view, and the store's
// versions (results.Store.Versions), the gates' version added to the
// results' (both only grow: the sum changes whenever either does).
func (a *Agent) ReportVersion() (view *pods.View, results, observations uint64) {
	results, observations = a.Store.Versions()
	return a.View(), results + a.Gates.Version(), observations
}

// ReportPod describes the pod a namespace and name stand for
// (pods.View.ByName).
func (a *Agent) ReportPod(namespace, name string) (pods.PodReport, bool) {
	p, ok := a.View().ByName(namespace, name)
	if !ok {
		return pods.PodReport{}, false
	}
	return pods.ReportPod(p, a.Store, a.Gates.Gates()), true
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

// PodSet is a set of pods the agent makes that its owner changes (play's
// files): a pods.OwnedSource.
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

// Pods returns the pods (pods.OwnedSource).
func (s *PodSet) Pods() ([]*spec.Pod, []*spec.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods, nil
}

// Changed is signalled after Set.
func (s *PodSet) Changed() <-chan struct{} { return s.changed }
