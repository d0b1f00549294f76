//go:build deploy

package deploy

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

const daemonSetPath = "deploy/kubernetes/daemonset.yaml"

// loadDaemonSet decodes the DaemonSet strictly (an unknown or duplicate
// field is an error, as `kubectl apply --validate=strict` makes it).
func loadDaemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	data := readFile(t, daemonSetPath)
	if docs := regexp.MustCompile(`(?m)^---`).FindAllIndex(data, -1); len(docs) > 0 {
		t.Fatalf("%s: one document expected (the Secret stays commented out)", daemonSetPath)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(data, &ds); err != nil {
		t.Fatalf("%s: %v", daemonSetPath, err)
	}
	return &ds
}

// agentContainer is the DaemonSet's one container.
func agentContainer(t *testing.T, ds *appsv1.DaemonSet) *corev1.Container {
	t.Helper()
	if n := len(ds.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%d containers, want 1", n)
	}
	return &ds.Spec.Template.Spec.Containers[0]
}

// flagArgs are a container's --name=value arguments after the command.
func flagArgs(t *testing.T, c *corev1.Container) map[string]string {
	t.Helper()
	if len(c.Args) == 0 || c.Args[0] != "run" {
		t.Fatalf("args %v: want run first", c.Args)
	}
	flags := map[string]string{}
	for _, a := range c.Args[1:] {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Fatalf("argument %q: write flags as --name=value", a)
		}
		flags[name] = value
	}
	return flags
}

// Contract (issue 16, item 7): the DaemonSet decodes into the Kubernetes
// API types and passes the API server's checks that apimachinery offers.
func TestDaemonSetIsValid(t *testing.T) {
	t.Parallel()
	ds := loadDaemonSet(t)
	if ds.APIVersion != "apps/v1" || ds.Kind != "DaemonSet" {
		t.Errorf("%s, %s: want apps/v1 DaemonSet", ds.APIVersion, ds.Kind)
	}
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	for _, msg := range validation.IsDNS1123Subdomain(ds.Name) {
		errs = append(errs, field.Invalid(meta.Child("name"), ds.Name, msg))
	}
	for _, msg := range validation.IsDNS1123Label(ds.Namespace) {
		errs = append(errs, field.Invalid(meta.Child("namespace"), ds.Namespace, msg))
	}
	spec := field.NewPath("spec")
	errs = append(errs, metav1validation.ValidateLabels(ds.Spec.Template.Labels, spec.Child("template", "metadata", "labels"))...)
	if ds.Spec.Selector == nil {
		errs = append(errs, field.Required(spec.Child("selector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(ds.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
		if sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector); err != nil || sel.Empty() || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
			errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), ds.Spec.Template.Labels, "`selector` does not match template `labels`"))
		}
	}
	pod := ds.Spec.Template.Spec
	podPath := spec.Child("template", "spec")
	volumes := map[string]bool{}
	for i, v := range pod.Volumes {
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(podPath.Child("volumes").Index(i).Child("name"), v.Name, msg))
		}
		if volumes[v.Name] {
			errs = append(errs, field.Duplicate(podPath.Child("volumes").Index(i).Child("name"), v.Name))
		}
		volumes[v.Name] = true
	}
	for i, c := range pod.Containers {
		cPath := podPath.Child("containers").Index(i)
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(cPath.Child("name"), c.Name, msg))
		}
		for j, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				errs = append(errs, field.NotFound(cPath.Child("volumeMounts").Index(j).Child("name"), m.Name))
			}
		}
		for j, p := range c.Ports {
			for _, msg := range validation.IsValidPortNum(int(p.ContainerPort)) {
				errs = append(errs, field.Invalid(cPath.Child("ports").Index(j).Child("containerPort"), p.ContainerPort, msg))
			}
			for _, msg := range validation.IsValidPortName(p.Name) {
				errs = append(errs, field.Invalid(cPath.Child("ports").Index(j).Child("name"), p.Name, msg))
			}
		}
		for j, e := range c.Env {
			for _, msg := range validation.IsEnvVarName(e.Name) {
				errs = append(errs, field.Invalid(cPath.Child("env").Index(j).Child("name"), e.Name, msg))
			}
		}
		for name, q := range c.Resources.Requests {
			if l, ok := c.Resources.Limits[name]; ok && q.Cmp(l) > 0 {
				errs = append(errs, field.Invalid(cPath.Child("resources", "requests").Key(string(name)), q.String(), "must be less than or equal to the limit"))
			}
		}
	}
	for _, e := range errs {
		t.Error(e)
	}

	// The pod as the agent reads Pod manifests: its probes checked with
	// the API server's rules (kubelet 1.36's), named ports declared.
	podYAML, err := yaml.Marshal(&corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-node1", Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels},
		Spec:       pod,
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "pod.yaml")
	if err := os.WriteFile(file, podYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := tryRun(t, "", nil, agentBinary(t), "validate", file); err != nil {
		t.Errorf("cri-prober validate of the DaemonSet's pod: %v\n%s", err, out)
	}
}

// Contract (issue 16, item 7): the DaemonSet runs the agent on every node
// with what it needs and nothing more: the image make image builds, host
// network, the containerd socket, a state directory, no capability, a read-only root,
// tolerations of every taint, system-node-critical, resources, probes.
func TestDaemonSetRunsTheAgent(t *testing.T) {
	t.Parallel()
	ds := loadDaemonSet(t)
	pod := ds.Spec.Template.Spec
	c := agentContainer(t, ds)
	flags := flagArgs(t, c)

	// TestMakeImage checks that make image's archive carries this tag.
	if !strings.HasPrefix(c.Image, "localhost/") || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("image %s (pull %s): want make image's localhost/ image, pull Never: imported on each node with ctr, no registry",
			c.Image, c.ImagePullPolicy)
	}
	if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v, dnsPolicy %s: want the node's network (probes to pod IPs, as kubelet's) and ClusterFirstWithHostNet", pod.HostNetwork, pod.DNSPolicy)
	}
	if pod.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q, want system-node-critical", pod.PriorityClassName)
	}
	if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == "" && tol.Operator == corev1.TolerationOpExists && tol.Effect == "" && tol.TolerationSeconds == nil
	}) {
		t.Errorf("tolerations %v: want {operator: Exists}, which tolerates every taint", pod.Tolerations)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken: want false, the agent never talks to the API server")
	}

	// Security: uid 0 for the socket, no capability, nothing else.
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("no securityContext")
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Error("runAsUser: want 0, explicit (the containerd socket is root's)")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("privileged")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation: want false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem: want true")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("capabilities %v: want drop [ALL], add none", sc.Capabilities)
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil && pod.SecurityContext != nil {
		seccomp = pod.SecurityContext.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile %v: want RuntimeDefault", seccomp)
	}

	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	hostPath := func(mountPath string) (*corev1.HostPathVolumeSource, corev1.VolumeMount) {
		m, ok := mounts[mountPath]
		if !ok {
			t.Errorf("nothing mounted at %s", mountPath)
			return nil, m
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.HostPath != nil {
				return v.HostPath, m
			}
		}
		t.Errorf("%s: volume %s is not a hostPath", mountPath, m.Name)
		return nil, m
	}

	// The containerd socket: --runtime-endpoint's directory from the host,
	// read-only (connecting to a socket needs no write access).
	socket, ok := strings.CutPrefix(flags["runtime-endpoint"], "unix://")
	if !ok {
		t.Fatalf("--runtime-endpoint=%s: want unix://", flags["runtime-endpoint"])
	}
	if hp, m := hostPath(filepath.Dir(socket)); hp != nil {
		if hp.Path != filepath.Dir(socket) || !m.ReadOnly || hp.Type == nil || *hp.Type != corev1.HostPathDirectory {
			t.Errorf("%s: hostPath %s (%v), readOnly %v: want the node's %s, type Directory, read-only", m.MountPath, hp.Path, hp.Type, m.ReadOnly, filepath.Dir(socket))
		}
	}
	// The state directory: --state-dir, the node's /var/lib/cri-prober
	// (the systemd unit's StateDirectory), writable, made if missing.
	stateDir := flags["state-dir"]
	if stateDir == "" {
		t.Error("no --state-dir: readiness and the restart ledger would be lost at every agent restart")
	} else if hp, m := hostPath(stateDir); hp != nil {
		if hp.Path != "/var/lib/cri-prober" || m.ReadOnly || hp.Type == nil || *hp.Type != corev1.HostPathDirectoryOrCreate {
			t.Errorf("%s: hostPath %s (%v), readOnly %v: want /var/lib/cri-prober, DirectoryOrCreate, writable", m.MountPath, hp.Path, hp.Type, m.ReadOnly)
		}
	}
	if m, ok := mounts[flags["pod-manifests"]]; !ok || !m.ReadOnly {
		t.Errorf("--pod-manifests=%s: want it mounted read-only", flags["pod-manifests"])
	}
	if flags["spec-sources"] != "manifests" {
		t.Errorf("--spec-sources=%s: want manifests (kubelet copies every Pod's annotations onto its sandbox)", flags["spec-sources"])
	}
	if flags["host-ip"] != "$(NODE_IP)" || !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP"
	}) {
		t.Error("--host-ip: want $(NODE_IP), from status.hostIP (kubelet's address for host-network pods)")
	}

	// The state API: on the node's loopback, the port the probes use.
	host, port, err := net.SplitHostPort(flags["listen"])
	if err != nil || !net.ParseIP(host).IsLoopback() {
		t.Errorf("--listen=%s: want a loopback address (hostNetwork: any other is reachable from every pod)", flags["listen"])
	}
	var metricsPort int32
	for _, p := range c.Ports {
		if p.Name == "metrics" {
			metricsPort = p.ContainerPort
		}
	}
	if strconv.Itoa(int(metricsPort)) != port {
		t.Errorf("port metrics %d, --listen port %s", metricsPort, port)
	}
	checkProbe := func(kind string, p *corev1.Probe) {
		if p == nil {
			t.Errorf("no %s probe", kind)
			return
		}
		var host string
		switch {
		case p.HTTPGet != nil:
			host = p.HTTPGet.Host
			if p.HTTPGet.Port.String() != "metrics" && p.HTTPGet.Port.String() != port {
				t.Errorf("%s probe port %s, want metrics", kind, p.HTTPGet.Port.String())
			}
		case p.TCPSocket != nil:
			host = p.TCPSocket.Host
			if p.TCPSocket.Port.String() != "metrics" && p.TCPSocket.Port.String() != port {
				t.Errorf("%s probe port %s, want metrics", kind, p.TCPSocket.Port.String())
			}
		default:
			t.Errorf("%s probe: want httpGet or tcpSocket on the state API", kind)
		}
		if host != "127.0.0.1" {
			t.Errorf("%s probe host %q: the API listens on 127.0.0.1 only", kind, host)
		}
	}
	checkProbe("readiness", c.ReadinessProbe)
	checkProbe("liveness", c.LivenessProbe)
	if c.ReadinessProbe != nil && (c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/healthz") {
		t.Error("readiness probe: want GET /healthz (503 while containerd is unreachable)")
	}
	if c.LivenessProbe != nil && (c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/livez") {
		t.Error("liveness probe: want GET /livez (the agent's own liveness; /healthz is 503 while containerd is down, and restarting the agent would not help)")
	}

	// Resources: requested, memory bounded, CPU not (throttling makes probes late).
	req, lim := c.Resources.Requests, c.Resources.Limits
	if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() {
		t.Errorf("resources %v: want cpu and memory requests and a memory limit", c.Resources)
	}
	if !lim.Cpu().IsZero() {
		t.Error("a CPU limit: throttling would make probes late")
	}
}

// Contract: the DaemonSet's arguments are flags `run` has, and the agent
// starts with them (paths on the node replaced by the test's, the
// runtime a fake one), probing host-network pods at the node's address.
func TestDaemonSetArgsStartTheAgent(t *testing.T) {
	t.Parallel()
	ds := loadDaemonSet(t)
	c := agentContainer(t, ds)
	flags := flagArgs(t, c)
	help := run(t, "", nil, agentBinary(t), "run", "--help")
	for name := range flags {
		if !regexp.MustCompile(`(?m)^\s+(-\w, )?--` + regexp.QuoteMeta(name) + `\b`).MatchString(help) {
			t.Errorf("--%s is not a flag of cri-prober run", name)
		}
	}
	defined := map[string]bool{}
	for _, e := range c.Env {
		defined[e.Name] = true
	}
	for _, m := range regexp.MustCompile(`\$\((\w+)\)`).FindAllStringSubmatch(strings.Join(c.Args, " "), -1) {
		if !defined[m[1]] {
			t.Errorf("$(%s) in args, not in env", m[1])
		}
	}

	rt := fakeruntime.NewForTest(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "pods"), 0o755); err != nil {
		t.Fatal(err)
	}
	const nodeIP = "192.0.2.77"
	replace := map[string]string{
		"runtime-endpoint": rt.Endpoint(),
		"pod-manifests":    filepath.Join(dir, "pods"),
		"state-dir":        filepath.Join(dir, "state"),
		"listen":           "", // 9440 may be taken on this machine
		"host-ip":          nodeIP,
	}
	args := []string{"run", "--containerd-address=none"}
	for _, a := range c.Args[1:] {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if v, ok := replace[name]; ok {
			a = "--" + name + "=" + v
		}
		args = append(args, a)
	}
	p := startAgent(t, nil, rt, args)
	if got := p.waitLog(probingLine, 30*time.Second)[1]; got != nodeIP {
		t.Errorf("the agent probes host-network pods at %s, want --host-ip's %s", got, nodeIP)
	}
	if err := p.stop(); err != nil {
		t.Errorf("the agent's exit on SIGTERM: %v", err)
	}
}
