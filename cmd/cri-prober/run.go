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
	promversion "github.com/prometheus/common/version"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/exec"
	"github.com/cri-prober/cri-prober/pkg/hooks"
	"github.com/cri-prober/cri-prober/pkg/manifests"
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
	storage            storageFlags
	killBudget         killBudgetFlags
	containerLogs      containerLogFlags
	gc                 gcFlags
	imageGC            imageGCFlags
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
	fs.BoolVar(&o.profiling, "profiling", false, "serve Go's profiles on the state API under /debug/pprof/ (as Kubernetes components' --profiling; CPU profiles of at most 25s, the API's write timeout being 30s), only to clients the agent can name, as changes are: on a unix socket, or behind a --web.config.file that checks basic auth or client certificates (never the command line); off by default: they show the process's internals")
	fs.IntVar(&o.maxInFlight, "max-probes-in-flight", prober.DefaultMaxProbesInFlight, "HTTP, TCP and gRPC probes running at once at most: beyond it, due probes wait for a slot in the order they fell due (lateness shows in cri_prober_probe_lateness_seconds), which bounds the agent's memory and CPU run queue under overload; exec probes wait on the runtime and are not counted; 0: no bound")
	fs.StringVar(&o.probeNetwork, "probe-network", spec.ProbeNetworkNode, "where HTTP, TCP and gRPC probes are dialled from: node (kubelet's way: the pod IP, from the node) or pod (inside each pod's network namespace, to 127.0.0.1 unless the probe sets a host, so apps listening only on localhost can be probed; needs CAP_SYS_ADMIN); a pod's "+spec.ProbeNetworkAnnotation+" annotation wins")
	fs.StringVar(&o.onTransition, "on-transition", "", "shell `command` (/bin/sh -c) run when a container becomes ready, not ready, or is restarted: the transition as JSON on its stdin, and CRI_PROBER_TRANSITION (ready, not-ready, restarted), CRI_PROBER_NAMESPACE, CRI_PROBER_POD, CRI_PROBER_CONTAINER")
	fs.StringVar(&o.webhook, "webhook", "", "`URL` POSTed the same JSON on every transition (tried 3 times on 5xx or network errors)")
	fs.StringVar(&o.stateDir, "state-dir", "", "`directory` where the agent keeps what must survive its own restart: the restart ledger (cri-prober why), the readiness gates set with cri-prober gate, and each probe's result and run toward its threshold, so that an agent restart does not turn ready containers not ready; empty: nothing kept (kubelet's behaviour)")
	o.policy.register(fs)
	o.podSync.register(fs)
	o.storage.register(fs)
	o.killBudget.register(fs)
	o.containerLogs.register(fs)
	o.gc.register(fs)
	o.imageGC.register(fs)
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
	cfg, err := o.validate()
	if err != nil {
		return usageError{cmd: cmd, err: err}
	}
	setVerbosity(o.verbosity, o.logFormat) // -v and --log-format, from the flags and the config file
	logger := klog.FromContext(ctx)
	if os.Getenv("GOMAXPROCS") == "" { // the user's setting wins
		procs := probe.Procs(defaultProcs)
		runtime.GOMAXPROCS(procs)
		logger.V(2).Info("Set GOMAXPROCS for probe sockets' blocking close", "procs", procs)
	}

	cfg.ProbeRegistry, cfg.AgentRegistry = prometheus.NewRegistry(), prometheus.NewRegistry()
	cfg.AgentRegistry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoCollector(cfg.NodeName))
	if cfg.Poller.Metrics, err = cri.NewMetrics(cfg.AgentRegistry); err != nil {
		return err
	}
	client, err := o.dial(ctx, cri.WithMetrics(cfg.Poller.Metrics))
	if err != nil {
		return err
	}
	defer client.Close()
	logger.Info("Connected to the runtime", "endpoint", client.Endpoint(), "runtime", client.RuntimeName(), "version", client.RuntimeVersion())
	cfg.Client, cfg.EventsAddress, cfg.Recorder = client, eventsAddress(o.containerdAddress, client), events.Log(logger)

	if cfg.Resolver.HostIP == "" {
		if cfg.Resolver.HostIP, err = defaultRouteIP(); err != nil {
			logger.Error(err, "Cannot find the node's address: host-network pods will be probed at 127.0.0.1; set --host-ip (under systemd, RestrictAddressFamilies must allow AF_NETLINK)")
			cfg.Resolver.HostIP = "127.0.0.1"
		}
	}
	if o.manifests != "" {
		cfg.Manifests = manifests.NewDir(o.manifests, nil)
		cfg.Manifests.Reload() // first read before probing starts
	}
	if o.staticPodPath != "" {
		if cfg.Node, err = o.node.node(cfg.Resolver.HostIP); err != nil {
			return fmt.Errorf("the node, for the pods of --static-pod-path: %w", err)
		}
		opts := []manifests.LoadOption{manifests.AsStatic(spec.Static{NodeName: cfg.Node.Name, LocalStorageLimits: cfg.Eviction.LocalStorageLimits})}
		if o.staticKeepLastGood {
			opts = append(opts, manifests.KeepLastGood())
		}
		static := manifests.NewDir(o.staticPodPath, nil, opts...)
		static.Reload() // first read before anything is made
		cfg.StaticPods, cfg.Maker.MatchRecord = static, inDir(o.staticPodPath)
		logger.Info("Making the pods of the static pod path", "staticPodPath", o.staticPodPath, "node", cfg.Node.Name, "rootDir", cfg.Node.RootDir)
	}
	engine, err := agent.New(ctx, cfg)
	if err != nil {
		return err
	}
	if cfg.EventsAddress == "" {
		logger.Info("Not following containerd events; exits are seen at the next relist", "relistPeriod", o.relistPeriod)
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { engine.Run(ctx) })
	logger.Info("Probing", "podManifests", o.manifests, "hostIP", cfg.Resolver.HostIP, "restart", cfg.Restart.Mode, "api", engine.APIAddresses())
	<-ctx.Done()
	logger.Info("Shutting down")
	return nil
}

// validate checks every flag value, before the runtime is dialled, a
// file opened or a port bound, and turns them into the engine's config
// (what needs the world is added by run). A bad value is an error that
// names its flag.
func (o *runOptions) validate() (agent.Config, error) {
	cfg := agent.Config{
		Poller:   cri.PollerConfig{RelistPeriod: o.relistPeriod},
		Resolver: pods.ResolverConfig{HostIP: o.hostIP, ProbeNetwork: o.probeNetwork},
		Exec:     exec.Config{PerPodConcurrency: o.maxExecPerPod},
		Prober:   prober.Config{MaxProbesInFlight: inFlightBound(o.maxInFlight)},
		Restart:  restart.Config{NotReadyOnExit: o.notReadyOnExit},
		StateDir: o.stateDir, KillBudget: o.killBudget.config(), OnTransition: o.onTransition, Webhook: o.webhook, NotifySystemd: true,
	}
	var err error
	if o.manifestInterval <= 0 {
		return cfg, errors.New("--pod-manifests-interval must be positive")
	}
	if o.manifests != "" || o.staticPodPath != "" {
		cfg.ManifestInterval = o.manifestInterval
	}
	if err := spec.ValidateProbeNetwork(o.probeNetwork); err != nil {
		return cfg, fmt.Errorf("--probe-network: %w", err)
	}
	if cfg.Restart.Mode, err = restart.ParseMode(o.restartMode); err != nil {
		return cfg, fmt.Errorf("--restart: %w", err)
	}
	if cfg.Prober.ProbeMetrics, err = prober.ParseProbeMetrics(o.probeMetrics); err != nil {
		return cfg, fmt.Errorf("--probe-metrics: %w", err)
	}
	useManifests, useAnnotations, err := parseSpecSources(o.specSources)
	if err != nil {
		return cfg, fmt.Errorf("--spec-sources: %w", err)
	}
	cfg.Resolver.IgnoreAnnotations = !useAnnotations
	if o.manifests != "" && !useManifests {
		return cfg, errors.New("--pod-manifests is set but --spec-sources leaves manifests out: add manifests to --spec-sources or drop --pod-manifests")
	}
	if err := o.podSync.check(); err != nil {
		return cfg, err
	}
	o.podSync.apply(&cfg.Restart)
	thresholds, err := o.storage.check()
	if err != nil {
		return cfg, err
	}
	o.storage.apply(&cfg.Eviction, thresholds)
	if err := o.gc.check(); err != nil {
		return cfg, err
	}
	cfg.GC = o.gc.config()
	if err := cfg.KillBudget.Check(); err != nil {
		return cfg, err
	}
	if cfg.ContainerLogs, err = o.containerLogs.config(); err != nil {
		return cfg, err
	}
	if cfg.NodeName, err = o.node.name(); err != nil {
		return cfg, err
	}
	gc := o.imageGC.config()
	if err := gc.Validate(); err != nil {
		return cfg, err
	}
	if o.staticPodPath != "" {
		// The agent keeps the node as the static pods' kubelet: image
		// garbage collection is node-wide, as kubelet's.
		cfg.ImageGC = &gc
		if cfg.Restart.Mode != restart.Recreate {
			return cfg, fmt.Errorf("--static-pod-path makes the agent the pods' kubelet: it needs --restart=%s", restart.Recreate)
		}
		if err := o.node.check(); err != nil {
			return cfg, fmt.Errorf("the node, for the pods of --static-pod-path: %w", err)
		}
	}
	if o.maxInFlight < 0 {
		return cfg, errors.New("--max-probes-in-flight must be 0 (no bound) or positive")
	}
	if o.maxExecPerPod < 0 {
		return cfg, errors.New("--max-concurrent-exec-per-pod must be 0 (no limit) or positive")
	}
	if o.webhook != "" {
		u, err := url.Parse(o.webhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cfg, fmt.Errorf("--webhook %s: want an http:// or https:// URL", hooks.RedactURL(o.webhook))
		}
	}
	o.policy.apply(&cfg)
	if o.listen == "" && !o.systemdSocket {
		return cfg, nil
	}
	serve := api.ServeConfig{Address: o.listen, AllowedHosts: strings.Split(o.allowedHosts, ","), WebConfigFile: o.webConfigFile, MaxConnections: o.maxConnections}
	if o.maxConnections <= 0 || o.maxEventStreams <= 0 {
		return cfg, errors.New("--web.max-connections and --web.max-event-streams must be positive")
	}
	if err := api.CheckServe(serve, o.maxEventStreams); err != nil {
		return cfg, err
	}
	if !o.systemdSocket {
		if err := api.CheckAddress(o.listen); err != nil {
			return cfg, fmt.Errorf("--listen %w", err)
		}
	}
	if o.profiling && !o.systemdSocket && !strings.HasPrefix(o.listen, "unix://") && o.webConfigFile == "" {
		return cfg, fmt.Errorf("--profiling serves the agent's internals, which any local user (and any web page) could read on %s: listen on a unix socket (--listen unix:///run/cri-prober/api.sock, or the systemd socket unit) or give --web.config.file", o.listen)
	}
	cfg.API = &agent.APIConfig{Serve: serve, Systemd: o.systemdSocket, Retry: listenRetry, MaxEventStreams: o.maxEventStreams,
		Profiling: o.profiling, KubeStateNamespaces: o.kubeStateNS}
	return cfg, nil
}

// listenRetry is how often a --listen address that could not be bound is
// tried again (kubelet retries its healthz server every 5 s); tests
// shorten it.
var listenRetry = 5 * time.Second

// inDir says which records of pods under the root directory are the
// agent's: those made from a manifest in dir (play's pods are not).
func inDir(dir string) func(podfs.Record) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return func(r podfs.Record) bool { return filepath.Dir(r.Source) == abs }
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

// inFlightBound is --max-probes-in-flight as prober.Config takes it: the
// flag's 0 is no bound (the config's 0 is the default, 512).
func inFlightBound(flag int) int {
	if flag == 0 {
		return -1
	}
	return flag
}
