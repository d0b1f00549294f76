package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/exec"
	"github.com/cri-prober/cri-prober/pkg/manifests"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/probe"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

func newProbeCommand() *cobra.Command {
	var o probeOptions
	cmd := &cobra.Command{
		Use:   "probe ([POD] (-c CONTAINER | --container-id ID) (--liveness | --readiness | --startup | INLINE) [-- COMMAND ARG...] | URL | HOST:PORT)",
		Short: "Run one probe now (the container's own, or given inline) and print the result",
		Long: `Runs one probe now, through the same handlers as the agent (kubelet's
semantics: HTTP redirects, output caps, timeouts, three tries when it cannot
run at all), and prints the result, output and duration. No agent needed.

The target is a container: POD (NAMESPACE/NAME, or NAME with -n) and
-c CONTAINER (its name), or --container-id ID (a unique prefix will do, as
with crictl).

The probe is the container's own (--liveness, --readiness or --startup,
from --pod-manifests or its annotations), or one given inline: --http-get,
--tcp, --grpc, or an exec command given after --, word for word
(no splitting: cri-prober probe web -c app -- sh -c 'test -f /tmp/ready'),
or --spec with a whole Probe in JSON or YAML.

With --address, or an address as the only argument, no runtime and no
container are needed: HTTP, TCP and gRPC probes go to that HOST:PORT (a
TCP connect if no probe is given; the port may then be left out of
--http-get /path and --grpc /service) or URL (http:// or https://: an HTTP
GET of it; grpc://HOST:PORT[/SERVICE]: a gRPC health check), with
kubelet's wire behaviour. --debug prints what was
sent and received, as blackbox_exporter's debug output does: the address
dialled, the request and its headers, the response's status line, headers
and a body excerpt, each step's time, then the result (credentials in
headers are shown as [redacted]).

Exit codes: 0 success (or warning), 1 failure, 2 error (bad arguments,
container not found, runtime unreachable, probe could not run).`,
		Example: `  cri-prober probe http://127.0.0.1:8080/healthz
  cri-prober probe 127.0.0.1:5432
  cri-prober probe grpc://127.0.0.1:5000/my.Service
  cri-prober probe demo/web -c web --liveness
  cri-prober probe --container-id 69b0618 --http-get 8080/healthz
  cri-prober probe demo/web -c web --timeout 2s -- cat /tmp/ready
  cri-prober probe demo/web -c web --grpc 5000
  cri-prober probe -n shop api -c api --http-get 8443/ready --scheme HTTPS --header 'Authorization: Bearer x'
  cri-prober probe --address http://127.0.0.1:8080/healthz --debug
  cri-prober probe --address 10.0.0.5:5000 --grpc /my.Service
  cri-prober probe --address 10.0.0.5:8080 --spec '{"httpGet":{"path":"/ready","port":8080},"timeoutSeconds":2}' -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return answerOrTwo(o.run(cmd, args)) // a failure is the probe's answer (1)
		},
	}
	fs := cmd.Flags()
	o.registerAs(fs, "connect-timeout")
	o.podRef.register(fs)
	registerPodAndContainer(fs, &o.pod, &o.containerName, "target container's `name` in the pod")
	fs.StringVar(&o.containerID, "container-id", "", "target container `ID` (or a unique prefix), instead of POD and -c")
	fs.StringVar(&o.manifests, "pod-manifests", "", "manifest `directory` to take the container's probe specs from (else its annotations)")
	fs.BoolVar(&o.liveness, "liveness", false, "run the container's liveness probe")
	fs.BoolVar(&o.readiness, "readiness", false, "run the container's readiness probe")
	fs.BoolVar(&o.startup, "startup", false, "run the container's startup probe")
	fs.StringVar(&o.execCmd, "exec", "", "run `COMMAND` in the container, split on spaces")
	_ = fs.MarkDeprecated("exec", "give the command after --, word for word: probe POD -c NAME -- sh -c '…'")
	fs.StringVar(&o.httpGet, "http-get", "", "HTTP GET `PORT/PATH` on the pod IP (e.g. 8080/healthz?full=1)")
	fs.StringVar(&o.scheme, "scheme", "HTTP", "with --http-get: HTTP or HTTPS (not verified, as kubelet)")
	fs.StringArrayVar(&o.headers, "header", nil, "with --http-get: a `'Name: value'` header (repeatable)")
	fs.StringVar(&o.tcp, "tcp", "", "TCP connect to `PORT` on the pod IP")
	fs.StringVar(&o.grpc, "grpc", "", "gRPC health check `PORT[/SERVICE]` on the pod IP")
	fs.DurationVar(&o.timeout, "timeout", 0, "probe timeout (default: the spec's, else 1s)")
	fs.StringVar(&o.probeNetwork, "probe-network", "", "node or pod: where network probes are dialled from (default: the pod's "+spec.ProbeNetworkAnnotation+", else node)")
	fs.StringVar(&o.address, "address", "", "probe this `HOST[:PORT]` or http(s) URL instead of a container: no runtime needed (HOST:PORT alone: a TCP connect; a URL: an HTTP GET of it)")
	fs.StringVar(&o.specText, "spec", "", "the probe as a Kubernetes `Probe` in JSON or YAML, as the cri-prober.io/ annotations take it (e.g. '{\"httpGet\":{\"port\":8080,\"path\":\"/healthz\"},\"timeoutSeconds\":2}')")
	o.policy.registerAnnotationHosts(fs)
	o.policy.registerDestinations(fs)
	fs.BoolVar(&o.debug, "debug", false, "print what was sent and received, as blackbox_exporter's debug output: the address dialled, the request and its headers, the response's status, headers and body excerpt, and timings")
	addOutputFlag(cmd, &o.output, outputTable, outputJSON, outputYAML)
	return cmd
}

type probeOptions struct {
	runtimeFlags
	podRef
	containerID, pod, containerName string
	manifests                       string
	liveness, readiness, startup    bool
	execCmd, httpGet, tcp, grpc     string
	execArgv                        []string
	scheme                          string
	headers                         []string
	timeout                         time.Duration
	probeNetwork                    string
	address, specText, output       string
	addressArg                      bool // the address is the argument, not --address
	debug                           bool
	policy                          probePolicy
}

func (o *probeOptions) run(cmd *cobra.Command, args []string) error {
	ctx, stdout := cmd.Context(), cmd.OutOrStdout()
	if dash := cmd.ArgsLenAtDash(); dash >= 0 {
		args, o.execArgv = args[:dash], args[dash:]
		if len(o.execArgv) == 0 {
			return usageErrorf(cmd, "no command after --")
		}
	}
	switch {
	case len(args) > 1:
		return usageErrorf(cmd, "unexpected argument(s): %s (an exec command goes after --)", strings.Join(args[1:], " "))
	case len(args) == 1 && isAddress(args[0]) && o.address != "":
		return usageErrorf(cmd, "the address is given twice (argument and --address): give one")
	case len(args) == 1 && isAddress(args[0]):
		o.address, o.addressArg = args[0], true
	case len(args) == 1 && o.pod != "":
		return usageErrorf(cmd, "the pod is given twice (argument and --pod): give one")
	case len(args) == 1:
		o.pod = args[0]
	}
	if err := checkOutput(cmd, o.output, outputTable, outputJSON, outputYAML); err != nil {
		return err
	}
	inline, err := o.inlineProbe()
	if err != nil {
		return usageErrorf(cmd, "%v", err)
	}
	if o.address != "" {
		return o.runAt(cmd, inline)
	}
	switch count(o.liveness, o.readiness, o.startup, inline != nil) {
	case 0:
		return usageErrorf(cmd, "give a probe: for a container (POD -c NAME, or --container-id ID), --liveness, --readiness, --startup, --http-get, --tcp, --grpc or a command after --; "+
			"or, with no container, an address as the only argument: http(s)://HOST[:PORT]/PATH (an HTTP GET), HOST:PORT (a TCP connect) or grpc://HOST:PORT[/SERVICE] (a gRPC health check)")
	case 1:
	default:
		return usageErrorf(cmd, "give exactly one probe: --liveness, --readiness, --startup, --http-get, --tcp, --grpc, or a command after --")
	}
	var namespace, name string
	switch {
	case o.containerID != "" && (o.pod != "" || o.containerName != ""):
		return usageErrorf(cmd, "give the target as --container-id ID, or as POD -c NAME, not both")
	case o.containerID == "" && (o.pod == "" || o.containerName == ""):
		return usageErrorf(cmd, "give the target as POD -c NAME (POD: NAMESPACE/NAME, or NAME with -n), or as --container-id ID")
	case o.pod != "":
		if namespace, name, err = o.podRef.parse(cmd, o.pod); err != nil {
			return err
		}
	}
	if err := spec.ValidateProbeNetwork(o.probeNetwork); err != nil {
		return usageErrorf(cmd, "--probe-network: %v", err)
	}

	client, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	poller, err := cri.NewPoller(client, cri.PollerConfig{})
	if err != nil {
		return err
	}
	snap, err := poller.Relist(ctx)
	if err != nil {
		return err
	}
	var manifestPods []*spec.Pod
	var manifestErrs []*spec.Error
	if o.manifests != "" {
		manifestPods, manifestErrs = manifests.LoadDir(o.manifests)
	}
	view := pods.Resolve(snap, pods.Inputs{Manifests: manifestPods, ManifestErrors: manifestErrs,
		Annotations: pods.ReadAnnotationsWith(string(o.policy.annotationProbeHosts))})
	pod, ctr, instance, err := findContainer(view, o.containerID, namespace, name, o.containerName)
	if err != nil {
		return err
	}
	if pod.ManifestInvalid {
		return fmt.Errorf("the pod's manifest is invalid: %v", pod.Problems[0])
	}
	if len(ctr.Problems) > 0 {
		return fmt.Errorf("the container's probe spec is invalid: %v", ctr.Problems[0])
	}
	cspec := ctr.Spec
	p := inline
	var extensions *spec.Extensions
	if p == nil {
		t := results.Startup
		switch {
		case o.liveness:
			t = results.Liveness
		case o.readiness:
			t = results.Readiness
		}
		if cspec != nil {
			p, extensions = cspec.Probe(t), cspec.Extension(t)
		}
		if p == nil {
			return fmt.Errorf("container %s of pod %s/%s has no %s probe (from --pod-manifests or its %s annotations)", ctr.Name, pod.Namespace, pod.Name, strings.ToLower(t.String()), spec.AnnotationPrefix)
		}
		p = p.DeepCopy()
	}
	if o.timeout > 0 {
		p.TimeoutSeconds = int32((o.timeout + time.Second - 1) / time.Second)
	}
	// The flag, else the pod's own choice as the agent resolves it.
	target := prober.TargetFor(pod, instance.ID, cspec, o.probeNetwork)
	target.Extensions = extensions
	if target.InPodNetwork && target.NetNS == "" {
		return fmt.Errorf("the runtime does not report pod %s/%s's network namespace; --probe-network pod needs containerd", pod.Namespace, pod.Name)
	}
	runner, err := exec.NewRunner(client, exec.Config{})
	if err != nil {
		return err
	}
	var tr *probe.Transcript
	if o.debug {
		tr = &probe.Transcript{}
	}
	start := time.Now()
	out := prober.RunOnce(ctx, runner, p, target, o.policy.allowedDestinations, tr)
	return o.print(stdout, out, time.Since(start), tr)
}

// runAt probes an address, with no runtime: the inline probe (or, for a
// URL, an HTTP GET of it; for HOST:PORT alone, a TCP connect) aimed at it.
func (o *probeOptions) runAt(cmd *cobra.Command, inline *corev1.Probe) error {
	switch {
	case o.liveness || o.readiness || o.startup:
		return usageErrorf(cmd, "--liveness, --readiness and --startup are a container's own probes: with --address, give the probe inline (--http-get, --tcp, --grpc or --spec)")
	case o.pod != "" || o.containerName != "" || o.containerID != "":
		return usageErrorf(cmd, "give either a container (POD -c NAME, --container-id) or an address (%s), not both", o.addressName())
	case inline != nil && inline.Exec != nil:
		return usageErrorf(cmd, "an exec probe runs in a container: give POD -c NAME or --container-id instead of --address")
	}
	if inline == nil && !strings.Contains(o.address, "://") {
		inline = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(1)}}} // the port is the address's
		spec.DefaultProbe(inline)
	}
	if inline != nil && o.timeout > 0 {
		inline.TimeoutSeconds = int32((o.timeout + time.Second - 1) / time.Second)
	}
	var tr *probe.Transcript
	if o.debug {
		tr = &probe.Transcript{}
	}
	start := time.Now()
	out, err := runProbeAt(cmd.Context(), inline, o.address, tr, o.policy.allowedDestinations)
	if err != nil {
		return usageErrorf(cmd, "%s: %v", o.addressName(), err)
	}
	return o.print(cmd.OutOrStdout(), out, time.Since(start), tr)
}

// addressName names the address as it was given, for errors.
func (o *probeOptions) addressName() string {
	if o.addressArg {
		return o.address
	}
	return "--address " + o.address
}

// probeResult is what probe -o json|yaml prints.
type probeResult struct {
	Result     string            `json:"result"`
	Output     string            `json:"output,omitempty"`
	Error      string            `json:"error,omitempty"`
	DurationMs float64           `json:"durationMs"`
	Transcript *probe.Transcript `json:"transcript,omitempty"`
}

// print shows the outcome (with --debug, the transcript, which ends with
// it) and returns the exit code's error: 1 failure, 2 could not probe.
func (o *probeOptions) print(stdout io.Writer, out prober.Outcome, took time.Duration, tr *probe.Transcript) error {
	switch {
	case structured(o.output):
		r := probeResult{Result: string(out.Raw), Output: out.Output, DurationMs: float64(took.Microseconds()) / 1000, Transcript: tr}
		if out.Err != nil {
			r.Result, r.Error = string(results.OutcomeUnknown), out.Err.Error()
		}
		if err := printObject(stdout, o.output, r); err != nil {
			return err
		}
	case tr != nil:
		if err := tr.Write(stdout); err != nil {
			return err
		}
	case out.Err != nil:
		safef(stdout, "result:   unknown (could not probe)\nerror:    %v\nduration: %s\n", out.Err, took.Round(time.Microsecond))
	default:
		// The output keeps its lines (this command is for reading it), each
		// made safe for the terminal.
		lines := strings.Split(strings.TrimSpace(out.Output), "\n")
		for i, l := range lines {
			lines[i] = terminalSafe(l)
		}
		fmt.Fprintf(stdout, "result:   %s\noutput:   %s\nduration: %s\n", out.Raw, strings.Join(lines, "\n          "), took.Round(time.Microsecond))
	}
	switch {
	case out.Err != nil:
		return errProbeError
	case out.Result != results.Success:
		return errProblemsFound
	}
	return nil
}

// isAddress reports whether a probe's argument is an address rather than a
// pod: a URL, or HOST:PORT ([IPv6]:PORT). A pod's NAMESPACE/NAME never has
// a colon.
func isAddress(arg string) bool {
	return strings.Contains(arg, ":") || strings.HasPrefix(arg, "[")
}

// errProbeError makes the exit code 2 after the error was printed.
var errProbeError = errors.New("probe could not run")

func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// inlineProbe builds the probe given on the command line, if any, with the
// API server's defaults.
func (o *probeOptions) inlineProbe() (*corev1.Probe, error) {
	if o.specText != "" {
		if o.execCmd != "" || len(o.execArgv) > 0 || o.httpGet != "" || o.tcp != "" || o.grpc != "" {
			return nil, errors.New("give the probe once: --spec, or --http-get, --tcp, --grpc or a command after --")
		}
		return probeFromSpec(o.specText)
	}
	var handlers []corev1.ProbeHandler
	if o.execCmd != "" && len(o.execArgv) > 0 {
		return nil, errors.New("give the command once: after -- (--exec is the old way)")
	}
	if o.execCmd != "" {
		handlers = append(handlers, corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: strings.Fields(o.execCmd)}})
	}
	if len(o.execArgv) > 0 {
		handlers = append(handlers, corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: o.execArgv}})
	}
	if o.httpGet != "" {
		port, path, _ := strings.Cut(o.httpGet, "/")
		h := &corev1.HTTPGetAction{Path: "/" + path, Port: o.portValue(port), Scheme: corev1.URIScheme(strings.ToUpper(o.scheme))}
		for _, hdr := range o.headers {
			name, value, ok := strings.Cut(hdr, ":")
			if !ok {
				return nil, fmt.Errorf("--header %q: want 'Name: value'", hdr)
			}
			h.HTTPHeaders = append(h.HTTPHeaders, corev1.HTTPHeader{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)})
		}
		handlers = append(handlers, corev1.ProbeHandler{HTTPGet: h})
	}
	if o.tcp != "" {
		handlers = append(handlers, corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: o.portValue(o.tcp)}})
	}
	if o.grpc != "" {
		portText, service, hasService := strings.Cut(o.grpc, "/")
		port := o.portValue(portText)
		if port.Type != intstr.Int {
			return nil, fmt.Errorf("--grpc %q: want PORT[/SERVICE] with a port number", o.grpc)
		}
		g := &corev1.GRPCAction{Port: port.IntVal}
		if hasService && service != "" {
			g.Service = &service
		}
		handlers = append(handlers, corev1.ProbeHandler{GRPC: g})
	}
	switch len(handlers) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, errors.New("give one inline probe: --http-get, --tcp, --grpc, or a command after --")
	}
	p := &corev1.Probe{ProbeHandler: handlers[0]}
	spec.DefaultProbe(p)
	if errs := spec.ValidateReadinessProbe(p); len(errs) > 0 {
		return nil, fmt.Errorf("invalid probe: %v", errs.ToAggregate())
	}
	return p, nil
}

// portValue is a port as the inline flags give it: a number or a name;
// with --address HOST:PORT it may be left out (--http-get /healthz, --grpc
// /service), the address's port being the one probed.
func (o *probeOptions) portValue(s string) intstr.IntOrString {
	if s == "" && o.address != "" {
		return intstr.FromInt32(1) // replaced by the address's port
	}
	if n, err := strconv.Atoi(s); err == nil {
		return intstr.FromInt(n)
	}
	return intstr.FromString(s)
}

// probeFromSpec reads --spec: a Probe in JSON or YAML, decoded and checked
// as the agent reads a probe annotation, but with any host: the caller
// wrote it.
func probeFromSpec(text string) (*corev1.Probe, error) {
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("--spec: not JSON or YAML: %w", err)
	}
	c, errs := spec.ContainerFromAnnotations("cli", "probe", "probe", map[string]string{spec.ReadinessAnnotation: string(js)}, spec.AnnotationProbeHostsAny)
	if len(errs) > 0 {
		return nil, fmt.Errorf("--spec: %s", strings.TrimPrefix(errs[0].Error(), spec.ReadinessAnnotation+"."))
	}
	return c.Probe(results.Readiness).DeepCopy(), nil
}

// findContainer finds a container instance by ID (or unique ID prefix), or
// by pod (NAMESPACE/NAME: the pod that name stands for) and container name
// (its current instance).
func findContainer(v *pods.View, id, namespace, podName, name string) (*pods.Pod, *pods.Container, *cri.Container, error) {
	if id != "" {
		var foundPod *pods.Pod
		var found *pods.Container
		var instance *cri.Container
		for _, p := range v.Pods() {
			for _, c := range p.Containers {
				for _, i := range c.Instances {
					if strings.HasPrefix(i.ID, id) {
						if instance != nil {
							return nil, nil, nil, fmt.Errorf("container ID %q is ambiguous: give more of it", id)
						}
						foundPod, found, instance = p, c, i
					}
				}
			}
		}
		if instance == nil {
			return nil, nil, nil, fmt.Errorf("no container with ID %q (see cri-prober pods)", id)
		}
		return foundPod, found, instance, nil
	}
	pod := namespace + "/" + podName
	p, ok := v.ByName(namespace, podName)
	if !ok {
		return nil, nil, nil, fmt.Errorf("no pod %s (see cri-prober pods)", pod)
	}
	c, ok := p.Container(name)
	if !ok || c.Current == nil {
		return nil, nil, nil, fmt.Errorf("pod %s has no container %q", pod, name)
	}
	return p, c, c.Current, nil
}
