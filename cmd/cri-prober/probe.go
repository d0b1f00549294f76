package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/exec"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

const probeHelp = `Usage: cri-prober probe TARGET PROBE [flags]

Runs one probe now, through the same handlers as the agent (kubelet's
semantics: HTTP redirects, output caps, timeouts, three tries when it cannot
run at all), and prints the result, output and duration. No agent needed.

Exit code: 0 success (or warning), 1 failure, 2 error (bad arguments,
container not found, runtime unreachable, probe could not run).

TARGET is --container ID (a unique prefix will do, as with crictl) or
--pod NAMESPACE/NAME --container-name NAME.
PROBE is --liveness, --readiness or --startup (the container's own, from
--pod-manifests or its annotations), or one given inline: --exec, --http-get,
--tcp or --grpc.

Examples:
  cri-prober probe --pod demo/web --container-name web --liveness
  cri-prober probe --container 69b0618 --http-get 8080/healthz
  cri-prober probe --container 69b0618 --exec 'cat /tmp/ready' --timeout 2s
  cri-prober probe --pod demo/web --container-name web --grpc 5000
  cri-prober probe --pod shop/api --container-name api --http-get 8443/ready --scheme HTTPS --header 'Authorization: Bearer x'

Flags:
`

type probeOptions struct {
	runtimeFlags
	containerID, pod, containerName string
	manifests                       string
	liveness, readiness, startup    bool
	execCmd, httpGet, tcp, grpc     string
	scheme                          string
	headers                         fileList
	timeout                         time.Duration
	probeNetwork                    string
}

// runProbe exits 2 for every error: a failure is the probe's result (1).
func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	err := probeOnce(ctx, args, stdout, stderr)
	if err == nil || errors.Is(err, errUsage) || errors.Is(err, errProblemsFound) || errors.Is(err, errProbeError) {
		return err
	}
	return withCode(2, err)
}

func probeOnce(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o probeOptions
	fs := newFlagSet("probe", probeHelp)
	o.registerAs(fs, "connect-timeout")
	fs.StringVar(&o.containerID, "container", "", "target container `ID` (or a unique prefix)")
	fs.StringVar(&o.pod, "pod", "", "target pod as `NAMESPACE/NAME` (with --container-name)")
	fs.StringVar(&o.containerName, "container-name", "", "target container's `name` in --pod")
	fs.StringVar(&o.manifests, "pod-manifests", "", "manifest `directory` to take the container's probe specs from (else its annotations)")
	fs.BoolVar(&o.liveness, "liveness", false, "run the container's liveness probe")
	fs.BoolVar(&o.readiness, "readiness", false, "run the container's readiness probe")
	fs.BoolVar(&o.startup, "startup", false, "run the container's startup probe")
	fs.StringVar(&o.execCmd, "exec", "", "run `COMMAND` in the container (split on spaces; use sh -c '…' for more)")
	fs.StringVar(&o.httpGet, "http-get", "", "HTTP GET `PORT/PATH` on the pod IP (e.g. 8080/healthz?full=1)")
	fs.StringVar(&o.scheme, "scheme", "HTTP", "with --http-get: HTTP or HTTPS (not verified, as kubelet)")
	fs.Var(&o.headers, "header", "with --http-get: a `'Name: value'` header (repeatable)")
	fs.StringVar(&o.tcp, "tcp", "", "TCP connect to `PORT` on the pod IP")
	fs.StringVar(&o.grpc, "grpc", "", "gRPC health check `PORT[/SERVICE]` on the pod IP")
	fs.DurationVar(&o.timeout, "timeout", 0, "probe timeout (default: the spec's, else 1s)")
	fs.StringVar(&o.probeNetwork, "probe-network", "", "node or pod: where network probes are dialled from (default: the pod's "+spec.ProbeNetworkAnnotation+", else node)")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err // flag.ErrHelp: run exits 0
	}
	inline, err := o.inlineProbe()
	if err != nil {
		safeln(stderr, err)
		return errUsage
	}
	chosen := count(o.liveness, o.readiness, o.startup, inline != nil)
	if chosen != 1 {
		safeln(stderr, "give exactly one probe: --liveness, --readiness, --startup, --exec, --http-get, --tcp or --grpc")
		return errUsage
	}
	if (o.containerID == "") == (o.pod == "") {
		safeln(stderr, "give the target as --container ID, or as --pod NAMESPACE/NAME --container-name NAME")
		return errUsage
	}

	client, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	poller, err := cri.NewPoller(client)
	if err != nil {
		return err
	}
	snap, err := poller.Relist(ctx)
	if err != nil {
		return err
	}
	var manifests []*spec.Pod
	var manifestErrs []*spec.Error
	if o.manifests != "" {
		manifests, manifestErrs = spec.LoadDir(o.manifests)
	}
	view := pods.Resolve(snap, pods.Inputs{Manifests: manifests, ManifestErrors: manifestErrs})
	pod, ctr, instance, err := findContainer(view, o.containerID, o.pod, o.containerName)
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
	probe := inline
	var extensions *spec.Extensions
	if probe == nil {
		t := results.Startup
		switch {
		case o.liveness:
			t = results.Liveness
		case o.readiness:
			t = results.Readiness
		}
		if cspec != nil {
			probe, extensions = cspec.Probe(t), cspec.Extension(t)
		}
		if probe == nil {
			return fmt.Errorf("container %s of pod %s/%s has no %s probe (from --pod-manifests or its %s annotations)", ctr.Name, pod.Namespace, pod.Name, strings.ToLower(t.String()), spec.AnnotationPrefix)
		}
		probe = probe.DeepCopy()
	}
	if o.timeout > 0 {
		probe.TimeoutSeconds = int32((o.timeout + time.Second - 1) / time.Second)
	}
	if err := spec.ValidateProbeNetwork(o.probeNetwork); err != nil {
		safef(stderr, "--probe-network: %v\n", err)
		return errUsage
	}
	// The flag, else the pod's own choice as the agent resolves it.
	host, inPodNetwork := pod.ProbeHost, pod.InPodNetwork
	if o.probeNetwork != "" {
		host, inPodNetwork = pods.ProbeAddress(pod.Sandbox, o.probeNetwork, "127.0.0.1")
	}
	target := prober.Target{Host: host, ContainerID: instance.ID, Container: cspec, Extensions: extensions}
	if inPodNetwork {
		if pod.Sandbox.NetNS == "" {
			return fmt.Errorf("the runtime does not report pod %s/%s's network namespace; --probe-network pod needs containerd", pod.Namespace, pod.Name)
		}
		target.NetNS = pod.Sandbox.NetNS
	}
	start := time.Now()
	runner, err := exec.NewRunner(client)
	if err != nil {
		return err
	}
	out := prober.RunProbe(ctx, runner, probe, target)
	took := time.Since(start)
	if out.Err != nil {
		safef(stdout, "result:   unknown (could not probe)\nerror:    %v\nduration: %s\n", out.Err, took.Round(time.Microsecond))
		return errProbeError
	}
	// The output keeps its lines (this command is for reading it), each
	// made safe for the terminal.
	lines := strings.Split(strings.TrimSpace(out.Output), "\n")
	for i, l := range lines {
		lines[i] = terminalSafe(l)
	}
	fmt.Fprintf(stdout, "result:   %s\noutput:   %s\nduration: %s\n", out.Raw, strings.Join(lines, "\n          "), took.Round(time.Microsecond))
	if out.Result != results.Success {
		return errProblemsFound
	}
	return nil
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
	var handlers []corev1.ProbeHandler
	if o.execCmd != "" {
		handlers = append(handlers, corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: strings.Fields(o.execCmd)}})
	}
	if o.httpGet != "" {
		port, path, _ := strings.Cut(o.httpGet, "/")
		h := &corev1.HTTPGetAction{Path: "/" + path, Port: portValue(port), Scheme: corev1.URIScheme(strings.ToUpper(o.scheme))}
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
		handlers = append(handlers, corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: portValue(o.tcp)}})
	}
	if o.grpc != "" {
		portText, service, hasService := strings.Cut(o.grpc, "/")
		port, err := strconv.Atoi(portText)
		if err != nil {
			return nil, fmt.Errorf("--grpc %q: want PORT[/SERVICE] with a port number", o.grpc)
		}
		g := &corev1.GRPCAction{Port: int32(port)}
		if hasService {
			g.Service = &service
		}
		handlers = append(handlers, corev1.ProbeHandler{GRPC: g})
	}
	switch len(handlers) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, errors.New("give one inline probe: --exec, --http-get, --tcp or --grpc")
	}
	p := &corev1.Probe{ProbeHandler: handlers[0]}
	spec.DefaultProbe(p)
	if errs := spec.ValidateReadinessProbe(p); len(errs) > 0 {
		return nil, fmt.Errorf("invalid probe: %v", errs.ToAggregate())
	}
	return p, nil
}

func portValue(s string) intstr.IntOrString {
	if n, err := strconv.Atoi(s); err == nil {
		return intstr.FromInt(n)
	}
	return intstr.FromString(s)
}

// findContainer finds a container instance by ID (or unique ID prefix), or
// by pod (NAMESPACE/NAME: the pod that name stands for) and container name
// (its current instance).
func findContainer(v *pods.View, id, pod, name string) (*pods.Pod, *pods.Container, *cri.Container, error) {
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
	ns, podName, ok := strings.Cut(pod, "/")
	if !ok || name == "" {
		return nil, nil, nil, fmt.Errorf("--pod %q: want NAMESPACE/NAME, with --container-name", pod)
	}
	p, ok := v.ByName(ns, podName)
	if !ok {
		return nil, nil, nil, fmt.Errorf("no pod %s (see cri-prober pods)", pod)
	}
	c, ok := p.Container(name)
	if !ok || c.Current == nil {
		return nil, nil, nil, fmt.Errorf("pod %s has no container %q", pod, name)
	}
	return p, c, c.Current, nil
}
