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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/eviction"
	"github.com/cri-prober/cri-prober/pkg/exec"
	"github.com/cri-prober/cri-prober/pkg/gc"
	"github.com/cri-prober/cri-prober/pkg/hooks"
	"github.com/cri-prober/cri-prober/pkg/imagegc"
	"github.com/cri-prober/cri-prober/pkg/killbudget"
	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/lifecycle"
	"github.com/cri-prober/cri-prober/pkg/logs"
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

// Config is what the engine is made of: each part's settings in its own
// Config, and what the agent itself runs (the commands turn their flags
// into it, checked first). Zero values are the defaults.
type Config struct {
	// Client reaches the runtime; the caller closes it after Run.
	Client *cri.Client
	// Poller is how the runtime is listed: its relist period and the
	// client's series (cri.NewMetrics), also given the poller's.
	Poller cri.PollerConfig
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
	// Maker is how the pods the agent makes are recorded: what each was
	// made from, and which pod records are this agent's (the agent and
	// play keep theirs apart under one root directory).
	Maker podmaker.Config
	// NodeName is the node's name (--node-name): who reports every event
	// (events.k8s.io/v1's reportingInstance), and the node of each restart
	// and of the API's series ("": events are not marked).
	NodeName string
	// Resolver is how each relist becomes a view: the host IP, the probe
	// network, the spec sources and where annotation probes may go.
	Resolver pods.ResolverConfig
	// Exec is how exec probes run (their per-pod limit).
	Exec exec.Config
	// Prober is how probes run and what is kept of them; its StateDir is
	// StateDir.
	Prober prober.Config
	// StateDir keeps what must survive the agent's restart: the restart
	// ledger, the readiness gates, the probes' state, the kill pause
	// (--state-dir; "": nothing kept).
	StateDir string
	// Restart is what the pod sync does; a Mode of "" runs none (wait).
	Restart restart.Config
	// KillBudget bounds probe-triggered kills (zero: no budget).
	KillBudget killbudget.Config
	// Eviction is how the local storage of the pods the agent makes is
	// bounded: their limits (ignored, as kubelet does for static pods, or
	// enforced) and the node's disk pressure (--local-storage-limits,
	// --eviction-hard). Without static pods, nothing.
	Eviction eviction.Config
	// ContainerLogs is how the log files of the containers the agent
	// manages are kept with a pod sync: kubelet's rotation settings and
	// the directory of their links (LinkDir "": none).
	ContainerLogs logs.Config
	// GC is the garbage collection of the dead instances and sandboxes the
	// agent made, and of its terminated pods' volumes, run with
	// --restart=recreate (the zero Config: kubelet's policy, every minute).
	GC gc.Config
	// OnTransition is a shell command and Webhook a URL told of every
	// transition (--on-transition, --webhook; "": none).
	OnTransition, Webhook string
	// Recorder receives every event (nil: logged).
	Recorder interface{ Record(events.Event) }
	// ProbeRegistry gets kubelet's probe series, AgentRegistry the agent's
	// own; the API shows both (nil: not exported).
	ProbeRegistry, AgentRegistry *prometheus.Registry
	// API serves the state API and metrics (nil: none).
	API *APIConfig
	// NotifySystemd tells systemd when the agent is ready and, with its
	// watchdog, alive (without $NOTIFY_SOCKET: nothing).
	NotifySystemd bool

	// ImageGC is kubelet's image garbage collection of the node's images
	// (every image of the runtime, as kubelet's), run only with
	// StaticPods: the agent keeps the node then, as their kubelet (nil:
	// none).
	ImageGC *imagegc.Config

	// TestProberOptions and TestRestartOptions are for tests only: knobs
	// no command sets (a shorter back-off, a clock).
	TestProberOptions  []prober.Option
	TestRestartOptions []restart.Option
	// TestGCOptions are the garbage collection's (a clock, the log files
	// removed with an instance).
	TestGCOptions []gc.Option
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
	Restarter *restart.Restarter // nil without Config.Restart.Mode
	// GC collects the dead instances and sandboxes the agent made and
	// tears its terminated pods' volumes down (nil unless Config.Restart.Mode
	// is recreate).
	GC *gc.GC
	// KillBudget is the restart budget and pause that pod sync spends,
	// the prober asks and the API changes (nil without
	// Config.Restart.Mode).
	KillBudget *killbudget.Budget
	Store      *results.Store
	Histories  *results.Histories
	Gates      *pods.GateStore
	Ledger     *ledger.Ledger // nil without Config.StateDir or Config.API
	// Eviction is the eviction manager of the pods the agent makes (nil
	// without static pods).
	Eviction *eviction.Manager
	// ContainerLogs rotates the log files of the agent's containers (nil
	// without Config.Restart.Mode).
	ContainerLogs *logs.Manager
	// ImageGC collects the node's images (nil without Config.ImageGC and
	// Config.StaticPods); the eviction manager frees space through it.
	ImageGC *imagegc.Manager

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
	started   time.Time // what NodeReport counts from
}

// New builds the engine and everything attached to it (the state kept
// under Config.StateDir, the hooks, the state API, the systemd notifier).
// Its subscriptions are made here, before anything runs, so that every
// part sees the first relist. Config's values are checked by the command
// that made it; an error here is the world's (a state directory, a
// socket), said with the flag it comes from.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	a := &Agent{cfg: cfg, Store: results.NewStore(), Histories: results.NewHistories(), started: time.Now()}
	if err := a.openState(ctx); err != nil {
		return nil, err
	}
	a.recorder = a.events(ctx)
	var err error
	if a.Poller, err = cri.NewPoller(cfg.Client, cfg.Poller); err != nil {
		return nil, err
	}
	if cfg.EventsAddress != "" {
		if a.watcher, err = cri.NewEventWatcher(cfg.EventsAddress, a.Poller); err != nil {
			return nil, err
		}
	}
	maker, err := a.newMaker()
	if err != nil {
		return nil, err
	}
	links, err := a.newNodeKeepers(maker)
	if err != nil {
		return nil, err
	}
	a.Resolver = pods.NewResolver(cfg.Resolver, a.specSources(maker)...)
	if err := a.newProber(); err != nil {
		return nil, err
	}
	if err := a.newPodSync(maker, links); err != nil {
		return nil, err
	}
	a.subscribe()
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

// newMaker returns the maker of the pods of Config.StaticPods on the
// node's directories, with the runtime's image service (nil without
// static pods).
func (a *Agent) newMaker() (*podmaker.Maker, error) {
	cfg := a.cfg
	if cfg.StaticPods == nil {
		return nil, nil
	}
	if cfg.Restart.Mode != restart.Recreate {
		return nil, fmt.Errorf("pods the agent makes need --restart=%s (the agent is their kubelet)", restart.Recreate)
	}
	fs, err := podfs.New(podfs.Config{Node: cfg.Node})
	if err != nil {
		return nil, fmt.Errorf("the pods' root directory: %w", err)
	}
	var recorder restart.Recorder = a.recorder
	if recorder == nil {
		recorder = events.Log(klog.Background())
	}
	return podmaker.New(fs, cfg.Client, recorder, nil, cfg.Maker), nil
}

// newNodeKeepers makes what keeps the node as kubelet keeps it, around
// pod sync: the log files of the agent's containers (rotated, linked,
// removed with their instances), the garbage collection of its dead
// instances, sandboxes and terminated pods, the image garbage collection,
// and the eviction manager, which under disk pressure reclaims through
// both collections first. It returns the links pod sync makes.
func (a *Agent) newNodeKeepers(maker *podmaker.Maker) (logs.Links, error) {
	cfg := a.cfg
	if cfg.Restart.Mode == "" {
		return logs.Links{}, nil
	}
	links, logManager, err := a.newContainerLogs()
	if err != nil {
		return links, fmt.Errorf("container logs: %w", err)
	}
	a.ContainerLogs = logManager
	if cfg.Restart.Mode == restart.Recreate {
		// kubelet's container garbage collection, beside its pod sync: what
		// pod sync leaves (dead instances and sandboxes, a terminated pod's
		// volumes) once no sync needs it.
		gcOpts := []gc.Option{gc.WithRegisterer(registerer(cfg.AgentRegistry)), gc.WithContainerLogs(links), gc.WithDanglingLinks(links)}
		if maker != nil {
			gcOpts = append(gcOpts, gc.WithTerminator(maker), gc.WithPodLogs(maker))
		}
		a.GC = gc.New(cfg.Client, cfg.GC, append(gcOpts, cfg.TestGCOptions...)...)
	}
	if err := a.newImageGC(); err != nil {
		return links, err
	}
	if maker != nil {
		var containerGC eviction.ContainerGC
		if a.GC != nil {
			containerGC = a.GC
		}
		var imageGC eviction.ImageGC
		if a.ImageGC != nil {
			imageGC = a.ImageGC
		}
		a.Eviction = eviction.New(cfg.Client, viewerFunc(func() *pods.View { return a.Resolver.View() }), cfg.Node.Layout(), a.evictionConfig(),
			eviction.WithRecorder(a.recorder), eviction.WithRegisterer(registerer(cfg.AgentRegistry)),
			eviction.WithGarbageCollectors(containerGC, imageGC))
		a.runFuncs = append(a.runFuncs, a.Eviction.Run)
	}
	return links, nil
}

// newImageGC makes the image garbage collector, with pods the agent
// makes: only then does it keep the node, as their kubelet.
func (a *Agent) newImageGC() error {
	cfg := a.cfg
	if cfg.ImageGC == nil || cfg.StaticPods == nil {
		return nil
	}
	var recorder imagegc.Recorder = a.recorder
	if recorder == nil {
		recorder = events.Log(klog.Background())
	}
	var err error
	if a.ImageGC, err = imagegc.New(cfg.Client, *cfg.ImageGC, imagegc.WithRecorder(recorder), imagegc.WithRegisterer(registerer(cfg.AgentRegistry))); err != nil {
		return fmt.Errorf("image garbage collection: %w", err)
	}
	a.runFuncs = append(a.runFuncs, a.ImageGC.Run)
	return nil
}

// specSources are the resolver's sources beside the runtime's annotations:
// the manifests, and the static pods with the records of those made.
func (a *Agent) specSources(maker *podmaker.Maker) []pods.Option {
	opts := []pods.Option{pods.WithRecorder(a.recorder)}
	if a.cfg.Manifests != nil {
		opts = append(opts, pods.WithManifests(a.cfg.Manifests))
	}
	if maker != nil {
		opts = append(opts, pods.WithStaticPods(a.cfg.StaticPods, maker))
	}
	if a.Eviction != nil {
		opts = append(opts, pods.WithEvictions(a.Eviction))
	}
	return opts
}

// viewerFunc is a function as an eviction.Viewer.
type viewerFunc func() *pods.View

func (f viewerFunc) View() *pods.View { return f() }

// evictionConfig is Config.Eviction with the node's name.
func (a *Agent) evictionConfig() eviction.Config {
	cfg := a.cfg.Eviction
	if cfg.NodeName == "" {
		cfg.NodeName = a.cfg.Node.Name
	}
	return cfg
}

// newProber makes the prober's manager, and the kill budget its failures
// wait on (with a pod sync).
func (a *Agent) newProber() error {
	cfg := a.cfg
	runner, err := exec.NewRunner(cfg.Client, cfg.Exec, exec.WithRegisterer(registerer(cfg.AgentRegistry)))
	if err != nil {
		return fmt.Errorf("exec runner: %w", err)
	}
	opts := []prober.Option{prober.WithHistories(a.Histories), prober.WithRecorder(a.recorder),
		prober.WithRegisterers(registerer(cfg.ProbeRegistry), registerer(cfg.AgentRegistry))}
	if cfg.Restart.Mode != "" {
		if a.KillBudget, err = killbudget.New(cfg.KillBudget, cfg.StateDir, killbudget.WithRecorder(a.recorder),
			killbudget.WithRegisterer(registerer(cfg.AgentRegistry))); err != nil {
			return fmt.Errorf("--state-dir: %w", err)
		}
		// A failed container whose kill waits (restart budget, pause) is
		// probed on.
		opts = append(opts, prober.WithKillWaits(a.KillBudget.Waits))
	}
	pcfg := cfg.Prober
	pcfg.StateDir = cfg.StateDir
	a.Manager, err = prober.NewManager(runner, a.Store, pcfg, append(opts, cfg.TestProberOptions...)...)
	return err
}

// newPodSync makes the restarter (kubelet's pod sync), if Config.Restart
// asks for one.
func (a *Agent) newPodSync(maker *podmaker.Maker, links logs.Links) error {
	cfg := a.cfg
	if cfg.Restart.Mode == "" {
		return nil
	}
	opts := []restart.Option{restart.WithHistories(a.Histories), restart.WithRelister(a.Poller), restart.WithLedger(a.Ledger),
		restart.WithRecorder(a.recorder), restart.WithRegisterer(registerer(cfg.AgentRegistry)), restart.WithKillBudget(a.KillBudget),
		restart.WithContainerLogs(links)}
	if maker != nil {
		opts = append(opts, restart.WithMaker(maker))
	}
	var err error
	a.Restarter, err = restart.New(cfg.Client, lifecycle.NewRunner(cfg.Client), a.Store, cfg.Restart, append(opts, cfg.TestRestartOptions...)...)
	return err
}

// subscribe makes the parts' subscriptions, each to the one before it, and
// the loops Run runs.
func (a *Agent) subscribe() {
	cfg := a.cfg
	a.criSub = a.Poller.Watch()
	a.runFuncs = append(a.runFuncs, a.Poller.Run, func(ctx context.Context) { a.Resolver.Run(ctx, a.criSub) })
	var managerSub *pods.Subscription
	if a.Restarter != nil {
		restarterSub := a.Resolver.Subscribe()
		managerSub = a.Restarter.Subscribe()
		a.subs = append(a.subs, restarterSub)
		a.runFuncs = append(a.runFuncs, func(ctx context.Context) { a.Restarter.Run(ctx, restarterSub) }, a.ContainerLogs.Run)
		if a.GC != nil {
			gcSub := a.Resolver.Subscribe()
			a.subs = append(a.subs, gcSub)
			a.runFuncs = append(a.runFuncs, func(ctx context.Context) { a.GC.Run(ctx, gcSub) })
		}
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
	relistPeriod := cfg.Poller.RelistPeriod
	if relistPeriod <= 0 {
		relistPeriod = cri.DefaultRelistPeriod
	}
	a.live = loopCheck{lastRelist: a.Poller.LastRelist, start: time.Now(), alive: relistPeriod + 3*cfg.Client.RequestTimeout() + time.Minute, now: time.Now}
}

// registerer is reg, or no registerer at all (not a nil *Registry in one).
func registerer(reg *prometheus.Registry) prometheus.Registerer {
	if reg == nil {
		return nil
	}
	return reg
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
