package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	promversion "github.com/prometheus/common/version"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/hooks"
	"github.com/cri-prober/cri-prober/pkg/podfs"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/probe"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

const runLong = `Runs the agent: probes every container that a Pod manifest or a CRI
annotation gives probes to, with kubelet's semantics, and logs each probe
event as kubelet would record it ("Liveness probe failed: …").

Probe specs come from
  --pod-manifests DIR   Pod manifests (YAML or JSON, several per file); a
                        manifest applies to the running pod sandbox with the
                        same namespace and name (and uid, if it sets one).
                        Edits are picked up while running.
  annotations           on CRI configs, for pods made with crictl:
                          container: cri-prober.io/liveness-probe,
                                     cri-prober.io/readiness-probe,
                                     cri-prober.io/startup-probe (JSON Probe)
                          sandbox:   cri-prober.io/restart-policy,
                                     cri-prober.io/termination-grace-period-seconds,
                                     cri-prober.io/probe-network (node or pod)
Containers that neither covers are observed, never probed.

Every flag can also be given in a YAML file (--config), under its name:
  pod-manifests: /etc/cri-prober/pods
  listen: 127.0.0.1:9440
  restart: recreate
Precedence: defaults, then the config file, then the command line.`

const runExample = `  cri-prober run --pod-manifests /etc/cri-prober/pods
  cri-prober run --config /etc/cri-prober/config.yaml --restart none
  cri-prober run --runtime-endpoint unix:///run/containerd/containerd.sock -v 2`

type runOptions struct {
	runtimeFlags
	node               nodeFlags
	staticPodPath      string
	staticKeepLastGood bool
	manifests          string
	manifestInterval   time.Duration
	relistPeriod       time.Duration
	containerdAddress  string
	hostIP             string
	restartMode        string
	notReadyOnExit     bool
	listen             string
	systemdSocket      bool
	config             string
	maxExecPerPod      int
	maxInFlight        int
	profiling          bool
	probeNetwork       string
	onTransition       string
	webhook            string
	stateDir           string
	webConfigFile      string
	allowedHosts       string
	kubeStateNS        []string
	maxConnections     int
	maxEventStreams    int
	specSources        string
	probeMetrics       string
	policy             probePolicy
	podSync            podSyncFlags
	killBudget         killBudgetFlags
}

// newRunCommand is run; its flags are also the keys of its config file.
func newRunCommand(o *runOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "run",
		Short:   "Run the agent: probe containers with kubelet's semantics, restart them",
		Long:    runLong,
		Example: runExample,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd)
		},
	}
	fs := cmd.Flags()
	o.register(fs)
	fs.StringVar(&o.manifests, "pod-manifests", "", "directory of Pod manifests to take probe specs from, for pods made by others (crictl, a CI harness)")
	fs.StringVar(&o.staticPodPath, "static-pod-path", "", "directory of Pod manifests whose pods the agent makes and keeps, as kubelet makes static pods (kubelet's staticPodPath): named <name>-<node>; an edited manifest is a new pod, a removed one is stopped and removed")
	fs.StringVar(&o.staticPodPath, "pod-manifest-path", "", "kubelet's old name of --static-pod-path")
	_ = fs.MarkHidden("pod-manifest-path")
	fs.BoolVar(&o.staticKeepLastGood, "static-pod-keep-last-good", false, "beyond kubelet: while a static pod file does not load (a typo, a file caught half-written), keep its last version that loaded in force; default, as kubelet: its pods are stopped and removed")
	o.node.register(fs)
	fs.StringVar(&o.specSources, "spec-sources", "manifests,annotations", "where probes and restart policies may come from: manifests (--pod-manifests: the operator's files), annotations (cri-prober.io/ annotations on CRI sandboxes and containers: whoever creates the pod; beside kubelet, every Pod creator, since kubelet copies a Pod's annotations onto its sandbox); comma-separated")
	fs.DurationVar(&o.manifestInterval, "pod-manifests-interval", 2*time.Second, "how often to look for changed manifests")
	fs.DurationVar(&o.relistPeriod, "relist-period", cri.DefaultRelistPeriod, "how often to list the runtime")
	fs.StringVar(&o.containerdAddress, "containerd-address", "", "containerd socket for its event stream (default: the CRI socket when the runtime is containerd; \"none\" to poll only)")
	fs.StringVar(&o.hostIP, "host-ip", "", "address probed for host-network pods (default: the address of the interface with the default route)")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:9440", "address of the state API and metrics (/healthz, /api/v1/…, /metrics, /metrics/probes): host:port, or unix:///path for a unix socket only the agent's user can use (0600); empty: none")
	fs.StringSliceVar(&o.kubeStateNS, "kube-state-namespaces", nil, "namespaces whose pods /metrics/kube-state covers (kube-state-metrics' --namespaces), comma-separated; default: every pod the agent sees")
	fs.StringVar(&o.probeMetrics, "probe-metrics", string(prober.PerProbeMetrics), "kubelet's probe series on /metrics/probes (prober_probe_total, prober_probe_duration_seconds): per-probe (kubelet's labels: container, pod, namespace and, on the total, pod_uid; about 470 bytes of memory per probe) or aggregate (by probe_type and result only: a few series for the node, whatever the number of probes)")
	fs.BoolVar(&o.systemdSocket, "web.systemd-socket", false, "serve the state API on the sockets systemd passes (socket activation, as Prometheus exporters' --web.systemd-socket) instead of --listen: systemd binds them before any user can and holds them across the agent's restarts (deploy/systemd/cri-prober.socket)")
	fs.StringVar(&o.webConfigFile, "web.config.file", "", "Prometheus exporter web configuration `file` for the state API: TLS, basic auth, headers (https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md); read again at every request")
	fs.StringVar(&o.allowedHosts, "web.allowed-hosts", "", "comma-separated `names` a request's Host header may carry besides the --listen address (and localhost on loopback), e.g. the node's name or a Service's that Prometheus scrapes; * for any. Others get 421, against DNS rebinding; unix sockets are not checked")
	fs.IntVar(&o.maxConnections, "web.max-connections", api.DefaultMaxConnections, "connections to the state API served at once; at the cap a new one replaces the oldest idle one, or is closed if none is idle")
	fs.IntVar(&o.maxEventStreams, "web.max-event-streams", api.DefaultMaxEventStreams, "event streams (events -f, /api/v1/events?watch=1) served at once, below --web.max-connections; beyond it 503 with Retry-After")
	fs.StringVar(&o.config, "config", "", "YAML `file` of flag values (keys: the flag names, e.g. pod-manifests: /etc/cri-prober/pods); flags given on the command line win")
	fs.IntVar(&o.maxExecPerPod, "max-concurrent-exec-per-pod", 0, "exec probes of one pod run at once at most (its others wait their turn, not counted against their timeout; other pods never wait for them); 0: no limit, kubelet's way")
	fs.BoolVar(&o.profiling, "profiling", false, "serve Go's profiles on the state API under /debug/pprof/ (as Kubernetes components' --profiling; CPU profiles of at most 25s, the API's write timeout being 30s), only on a unix socket or behind --web.config.file (never the command line); off by default: they show the process's internals")
	fs.IntVar(&o.maxInFlight, "max-probes-in-flight", prober.DefaultMaxProbesInFlight, "HTTP, TCP and gRPC probes running at once at most: beyond it, due probes wait for a slot in the order they fell due (lateness shows in cri_prober_probe_lateness_seconds), which bounds the agent's memory and CPU run queue under overload; exec probes wait on the runtime and are not counted; 0: no bound")
	fs.StringVar(&o.probeNetwork, "probe-network", spec.ProbeNetworkNode, "where HTTP, TCP and gRPC probes are dialled from: node (kubelet's way: the pod IP, from the node) or pod (inside each pod's network namespace, to 127.0.0.1 unless the probe sets a host, so apps listening only on localhost can be probed; needs CAP_SYS_ADMIN); a pod's "+spec.ProbeNetworkAnnotation+" annotation wins")
	fs.StringVar(&o.onTransition, "on-transition", "", "shell `command` (/bin/sh -c) run when a container becomes ready, not ready, or is restarted: the transition as JSON on its stdin, and CRI_PROBER_TRANSITION (ready, not-ready, restarted), CRI_PROBER_NAMESPACE, CRI_PROBER_POD, CRI_PROBER_CONTAINER")
	fs.StringVar(&o.webhook, "webhook", "", "`URL` POSTed the same JSON on every transition (tried 3 times on 5xx or network errors)")
	fs.StringVar(&o.stateDir, "state-dir", "", "`directory` where the agent keeps what must survive its own restart: the restart ledger (cri-prober why), the readiness gates set with cri-prober gate, and each probe's result and run toward its threshold, so that an agent restart does not turn ready containers not ready; empty: nothing kept (kubelet's behaviour)")
	o.policy.register(fs)
	o.podSync.register(fs)
	o.killBudget.register(fs)
	fs.StringVar(&o.restartMode, "restart", string(restart.Recreate), "what to do when a liveness or startup probe fails or a container exits: recreate (stop and restart per restartPolicy, with kubelet's back-off), stop (only stop), none (only tell: safe beside kubelet)")
	fs.BoolVar(&o.notReadyOnExit, "not-ready-on-exit", false, "beyond kubelet: a container whose instance the agent kills to restart it (a liveness or startup failure) is not ready from that instance's exit, shown exited until its replacement runs, so that load balancers stop sending to it at once; default, as kubelet: shown running and ready until the replacement has started and its postStart hook ended")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	_ = cmd.MarkFlagDirname("pod-manifests")
	_ = cmd.MarkFlagDirname("static-pod-path")
	_ = cmd.MarkFlagDirname("state-dir")
	return cmd
}

// defaultProcs is the runtime's own GOMAXPROCS, read before run changes it.
var defaultProcs = runtime.GOMAXPROCS(0)

func (o *runOptions) run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	if o.config != "" {
		if err := applyConfig(cmd.Flags(), o.config); err != nil {
			return usageError{cmd: cmd, err: err}
		}
	}
	if o.manifestInterval <= 0 {
		return usageErrorf(cmd, "--pod-manifests-interval must be positive")
	}
	if err := spec.ValidateProbeNetwork(o.probeNetwork); err != nil {
		return usageErrorf(cmd, "--probe-network: %v", err)
	}
	mode, err := restart.ParseMode(o.restartMode)
	if err != nil {
		return usageError{cmd: cmd, err: err}
	}
	probeMetrics, err := prober.ParseProbeMetrics(o.probeMetrics)
	if err != nil {
		return usageErrorf(cmd, "--probe-metrics: %v", err)
	}
	useManifests, useAnnotations, err := parseSpecSources(o.specSources)
	if err != nil {
		return usageErrorf(cmd, "--spec-sources: %v", err)
	}
	if o.manifests != "" && !useManifests {
		return usageErrorf(cmd, "--pod-manifests is set but --spec-sources leaves manifests out: add manifests to --spec-sources or drop --pod-manifests")
	}
	if err := o.podSync.check(); err != nil {
		return usageError{cmd: cmd, err: err}
	}
	if err := o.killBudget.config().Check(); err != nil {
		return usageError{cmd: cmd, err: err}
	}
	nodeName, err := o.node.name()
	if err != nil {
		return usageError{cmd: cmd, err: err}
	}
	if o.staticPodPath != "" && mode != restart.Recreate {
		return usageErrorf(cmd, "--static-pod-path makes the agent the pods' kubelet: it needs --restart=%s", restart.Recreate)
	}
	setVerbosity(o.verbosity, o.logFormat) // -v and --log-format, from the flags and the config file
	logger := klog.FromContext(ctx)
	if os.Getenv("GOMAXPROCS") == "" { // the user's setting wins
		procs := probe.Procs(defaultProcs)
		runtime.GOMAXPROCS(procs)
		logger.V(2).Info("Set GOMAXPROCS for probe sockets' blocking close", "procs", procs)
	}

	probeRegistry := prometheus.NewRegistry()
	agentRegistry := prometheus.NewRegistry()
	agentRegistry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoCollector(nodeName))
	criMetrics, err := cri.NewMetrics(agentRegistry)
	if err != nil {
		return err
	}

	client, err := o.dial(ctx, cri.WithMetrics(criMetrics))
	if err != nil {
		return err
	}
	defer client.Close()
	logger.Info("Connected to the runtime", "endpoint", client.Endpoint(), "runtime", client.RuntimeName(), "version", client.RuntimeVersion())

	hostIP := o.hostIP
	if hostIP == "" {
		var err error
		if hostIP, err = defaultRouteIP(); err != nil {
			logger.Error(err, "Cannot find the node's address: host-network pods will be probed at 127.0.0.1; set --host-ip (under systemd, RestrictAddressFamilies must allow AF_NETLINK)")
			hostIP = "127.0.0.1"
		}
	}
	ring := events.NewRing(1000)
	recorder := recorders{events.Log(logger), ring}
	var engine *agent.Agent // made below; the hooks read pod IPs from its view
	transitions, err := o.hooks(agentRegistry, func(namespace, pod string) string {
		if p, ok := engine.View().ByName(namespace, pod); ok {
			return p.IP()
		}
		return ""
	}, func(namespace, pod string) bool {
		_, ok := engine.View().ByName(namespace, pod)
		return ok
	})
	if err != nil {
		return usageError{cmd: cmd, err: err}
	}
	if transitions != nil {
		recorder = append(recorder, transitions)
	}
	ledger, warning, err := restart.OpenLedger(o.stateDir, restart.WithNode(nodeName))
	if err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	if warning != nil {
		logger.Error(warning, "Restart ledger") // set aside; a new one begins
	}
	gates, warning, err := openGates(o.stateDir)
	if err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	if warning != nil {
		logger.Error(warning, "Readiness gates") // set aside; none set
	}
	cfg := agent.Config{
		Client: client, RelistPeriod: o.relistPeriod, EventsAddress: eventsAddress(o.containerdAddress, client),
		HostIP: hostIP, ProbeNetwork: o.probeNetwork, IgnoreAnnotations: !useAnnotations, MaxExecPerPod: o.maxExecPerPod, Restart: mode, NotReadyOnExit: o.notReadyOnExit, Ledger: ledger, Gates: gates, Recorder: reported{instance: nodeName, to: recorder},
		ProbeRegisterer: probeRegistry, AgentRegisterer: agentRegistry, ProbeMetrics: probeMetrics, PollerOptions: []cri.PollerOption{cri.WithPollerMetrics(criMetrics)},
	}
	o.policy.apply(&cfg)
	o.podSync.apply(&cfg)
	budget, err := restart.NewKillBudget(o.killBudget.config(), o.stateDir)
	if err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	cfg.RestartOptions = append(cfg.RestartOptions, restart.WithKillBudget(budget))
	if o.stateDir != "" {
		cfg.ProberOptions = append(cfg.ProberOptions, prober.WithStateDir(o.stateDir))
	}
	if o.maxInFlight < 0 {
		return usageErrorf(cmd, "--max-probes-in-flight must be 0 (no bound) or positive")
	}
	cfg.ProberOptions = append(cfg.ProberOptions, prober.WithMaxProbesInFlight(o.maxInFlight))
	if o.manifests != "" {
		cfg.Manifests = spec.NewManifestDir(o.manifests, nil)
		cfg.Manifests.Reload() // first read before probing starts
		cfg.ManifestInterval = o.manifestInterval
	}
	if o.staticPodPath != "" {
		if cfg.Node, err = o.node.node(hostIP); err != nil {
			return fmt.Errorf("the node, for the pods of --static-pod-path: %w", err)
		}
		opts := []spec.LoadOption{spec.AsStatic(spec.Static{NodeName: cfg.Node.Name})}
		if o.staticKeepLastGood {
			opts = append(opts, spec.KeepLastGood())
		}
		static := spec.NewManifestDir(o.staticPodPath, nil, opts...)
		static.Reload() // first read before anything is made
		cfg.Owned, cfg.ManifestInterval, cfg.Owns = static, o.manifestInterval, inDir(o.staticPodPath)
		logger.Info("Making the pods of the static pod path", "staticPodPath", o.staticPodPath, "node", cfg.Node.Name, "rootDir", cfg.Node.RootDir)
	}
	if o.maxExecPerPod < 0 {
		return usageErrorf(cmd, "--max-concurrent-exec-per-pod must be 0 (no limit) or positive")
	}
	if engine, err = agent.New(cfg); err != nil {
		return err
	}
	if cfg.EventsAddress == "" {
		logger.Info("Not following containerd events; exits are seen at the next relist", "relistPeriod", o.relistPeriod)
	}

	// A relist makes up to 3 CRI calls, each bounded by the request
	// timeout: a loop that has not finished one in that long is stuck.
	live := loopCheck{lastRelist: engine.Poller.LastRelist, start: time.Now(), alive: o.relistPeriod + 3*o.requestTimeout + time.Minute, now: time.Now}
	var listeners *apiListeners
	serveConfig := api.ServeConfig{Address: o.listen, AllowedHosts: strings.Split(o.allowedHosts, ","), WebConfigFile: o.webConfigFile, MaxConnections: o.maxConnections}
	if o.listen != "" || o.systemdSocket {
		// A scrape writes megabytes at thousands of probes: a flood of them
		// from any local client is answered 503 beyond 2 at once, not with
		// the CPU the probes need (as api.MaxBusyRequests bounds the rest).
		metricsOpts := promhttp.HandlerOpts{MaxRequestsInFlight: 2, Timeout: 10 * time.Second, ErrorHandling: promhttp.ContinueOnError}
		apiServer := api.New(api.Config{
			Pods: engine, History: engine.Histories, Ledger: ledger, Gates: engine, Events: ring, Health: engine.Health, Live: live.err,
			Metrics:          promhttp.HandlerFor(prometheus.Gatherers{agentRegistry, probeRegistry}, metricsOpts),
			ProbeMetrics:     promhttp.HandlerFor(probeRegistry, metricsOpts),
			KubeStateMetrics: api.NewKubeState(engine, api.KubeStateOptions{NodeName: nodeName, HostIP: hostIP, Namespaces: o.kubeStateNS}),
			NodeName:         nodeName,
			Profiling:        o.profiling,
			Registerer:       agentRegistry, MaxEventStreams: o.maxEventStreams,
			Kills: killController(engine.Restarter),
		})
		if o.maxConnections <= 0 || o.maxEventStreams <= 0 {
			return usageErrorf(cmd, "--web.max-connections and --web.max-event-streams must be positive")
		}
		if err := apiServer.Check(serveConfig); err != nil {
			return usageError{cmd: cmd, err: err}
		}
		if !o.systemdSocket {
			if err := api.CheckAddress(o.listen); err != nil {
				return usageErrorf(cmd, "--listen %v", err)
			}
		}
		if o.profiling && !o.systemdSocket && !strings.HasPrefix(o.listen, "unix://") && o.webConfigFile == "" {
			return usageErrorf(cmd, "--profiling serves the agent's internals, which any local user (and any web page) could read on %s: listen on a unix socket (--listen unix:///run/cri-prober/api.sock, or the systemd socket unit) or give --web.config.file", o.listen)
		}
		if listeners, err = newAPIListeners(apiServer, serveConfig, o.listen, o.systemdSocket, agentRegistry); err != nil {
			return err
		}
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { engine.Run(ctx) })
	if transitions != nil {
		wg.Go(func() { transitions.Run(ctx) })
	}
	if listeners != nil {
		wg.Go(func() { listeners.run(ctx) })
	}
	notifier := systemdNotifier{ready: engine.Health, live: live.err}
	wg.Go(func() { notifier.run(ctx) })
	var serving []string
	if listeners != nil {
		serving = listeners.addresses()
	}
	logger.Info("Probing", "podManifests", o.manifests, "hostIP", hostIP, "restart", mode, "api", serving)
	<-ctx.Done()
	logger.Info("Shutting down")
	return nil
}

// openGates is the readiness gates' store: kept in the state directory,
// or in memory only without one (an agent restart forgets them).
func openGates(stateDir string) (gates *pods.GateStore, warning, err error) {
	if stateDir == "" {
		return pods.NewGateStore(nil), nil, nil
	}
	return pods.OpenGateStore(stateDir, nil)
}

// inDir says which records of pods under the root directory are the
// agent's: those made from a manifest in dir (play's pods are not).
func inDir(dir string) func(podfs.Owner) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return func(o podfs.Owner) bool { return filepath.Dir(o.Source) == abs }
}

// parseSpecSources reads --spec-sources.
func parseSpecSources(list string) (manifests, annotations bool, err error) {
	for _, s := range strings.Split(list, ",") {
		switch strings.TrimSpace(s) {
		case "manifests":
			manifests = true
		case "annotations":
			annotations = true
		case "":
		default:
			return false, false, fmt.Errorf("unknown source %q: want manifests, annotations or both (comma-separated)", strings.TrimSpace(s))
		}
	}
	if !manifests && !annotations {
		return false, false, errors.New("give at least one source: manifests, annotations")
	}
	return manifests, annotations, nil
}

// hooks returns the transition hooks the flags ask for (nil: none).
func (o *runOptions) hooks(reg prometheus.Registerer, podIP func(namespace, pod string) string, podExists func(namespace, pod string) bool) (*hooks.Hooks, error) {
	var opts []hooks.Option
	if o.onTransition != "" {
		opts = append(opts, hooks.WithCommand([]string{"/bin/sh", "-c", o.onTransition}))
	}
	if o.webhook != "" {
		u, err := url.Parse(o.webhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--webhook %s: want an http:// or https:// URL", hooks.RedactURL(o.webhook))
		}
		opts = append(opts, hooks.WithWebhook(o.webhook))
	}
	if len(opts) == 0 {
		return nil, nil
	}
	return hooks.New(append(opts, hooks.WithRegisterer(reg), hooks.WithPodIP(podIP), hooks.WithPodExists(podExists))...), nil
}

// reported says who reported each event (events.k8s.io/v1's
// reportingController and reportingInstance: cri-prober and the node's
// name) before it is logged, kept or sent.
type reported struct {
	instance string
	to       recorders
}

func (r reported) Record(e events.Event) {
	e.ReportingController, e.ReportingInstance = events.ReportingController, r.instance
	r.to.Record(e)
}

// recorders sends each event to several recorders.
type recorders []interface{ Record(events.Event) }

func (rs recorders) Record(e events.Event) {
	for _, r := range rs {
		r.Record(e)
	}
}

// isLocal says whether only this node reaches addr: a loopback address
// or a unix socket.
func isLocal(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}

// defaultRouteIP returns the IPv4 address of the interface that carries
// the default route, the address kubelet would report for the node.
func defaultRouteIP() (string, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return "", fmt.Errorf("default route: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var errs []error
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// Iface Destination Gateway …: the default route has destination 0.
		if len(fields) < 2 || fields[1] != "00000000" {
			continue
		}
		ip, err := interfaceIPv4(fields[0])
		if err == nil {
			return ip, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return "", errors.New("no default route in /proc/net/route")
	}
	return "", errors.Join(errs...)
}

// interfaceIPv4 is an interface's first IPv4 address (read over netlink).
func interfaceIPv4(name string) (string, error) {
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return "", fmt.Errorf("interface %s: %w", name, err)
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return "", fmt.Errorf("addresses of %s: %w", name, err)
	}
	for _, a := range addrs {
		if ipnet, ok := a.(*net.IPNet); ok && ipnet.IP.To4() != nil {
			return ipnet.IP.String(), nil
		}
	}
	return "", fmt.Errorf("interface %s has no IPv4 address", name)
}

// buildInfoCollector is cri_prober_build_info, as every exporter's
// <program>_build_info: 1, labelled by version, revision, Go version and
// platform, and the Kubernetes API version the agent was built with.
func buildInfoCollector(node string) prometheus.Collector {
	promversion.Version, promversion.Revision = version, revision()
	return versioncollector.NewCollector("cri_prober", versioncollector.WithExtraConstLabels(prometheus.Labels{"kubernetes_api": moduleVersion("k8s.io/api"), "node": node}))
}

// killController is the API's pause and budget: the restarter's, if any.
func killController(r *restart.Restarter) api.KillController {
	if r == nil {
		return nil
	}
	return r
}
