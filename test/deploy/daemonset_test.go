//go:build deploy

package deploy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"maps"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
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

// checkArgs checks that c's arguments are flags `run` has, and that the
// variables they name are c's.
func checkArgs(t *testing.T, c *corev1.Container) {
	t.Helper()
	help := run(t, "", nil, agentBinary(t), "run", "--help")
	for name := range flagArgs(t, c) {
		if !regexp.MustCompile(`(?m)^\s+(-\w, )?--` + regexp.QuoteMeta(name) + `\b`).MatchString(help) {
			t.Errorf("--%s is not a flag of cri-prober run", name)
		}
	}
	defined := map[string]bool{}
	for _, e := range c.Env {
		defined[e.Name] = true
	}
	for _, m := range envRef.FindAllStringSubmatch(strings.Join(c.Args, " "), -1) {
		if !defined[m[1]] {
			t.Errorf("$(%s) in args, not in env", m[1])
		}
	}
}

// envRef is kubelet's reference to a container's variable in its args.
var envRef = regexp.MustCompile(`\$\((\w+)\)`)

// Contract: the DaemonSet's arguments are flags `run` has, and the agent
// starts with them (paths on the node replaced by the test's, the
// runtime a fake one), probing host-network pods at the node's address.
func TestDaemonSetArgsStartTheAgent(t *testing.T) {
	t.Parallel()
	ds := loadDaemonSet(t)
	c := agentContainer(t, ds)
	checkArgs(t, c)

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

// remoteVariant is the DaemonSet file with its "Scraped from other hosts"
// variant applied as its comments tell an operator: the commented flags
// replace the active ones of the same names, the other commented lines of
// the DaemonSet (annotations, the web volume and its mount) are
// uncommented, and so is the Secret after it (returned apart: it is its
// own document). The probes stay as shipped: probeAdvice says how they
// change.
func remoteVariant(t *testing.T) (*appsv1.DaemonSet, *corev1.Secret) {
	t.Helper()
	lines := strings.Split(string(readFile(t, daemonSetPath)), "\n")
	// The Secret, commented out, is a second document after the
	// DaemonSet.
	end := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "# apiVersion:") })
	if end < 0 {
		t.Fatalf("%s: no commented Secret (# apiVersion: …)", daemonSetPath)
	}
	// Commented YAML, told from prose: a flag, or a key with nothing, one
	// word or a quoted or flow value after it (prose goes on in words).
	commentedFlag := regexp.MustCompile(`^(\s*)# (- --([\w.-]+)=\S*)$`)
	value := `(?:"[^"]*"|'[^']*'|\{[^{}]*\}|\[[^\]]*\]|[^\s#{}\[\]"']+)`
	commentedYAML := regexp.MustCompile(`^(\s*)# (\s*(?:- )?(?:[\w./-]+:(?: ` + value + `)?|\{[^{}]*\})(?:\s+#.*)?)$`)
	activeFlag := regexp.MustCompile(`^\s*- --([\w.-]+)=`)
	replaced := map[string]bool{}
	for _, l := range lines[:end] {
		if m := commentedFlag.FindStringSubmatch(l); m != nil {
			replaced[m[3]] = true
		}
	}
	var dsLines []string
	for _, l := range lines[:end] {
		if m := activeFlag.FindStringSubmatch(l); m != nil && replaced[m[1]] {
			continue
		}
		if m := commentedFlag.FindStringSubmatch(l); m != nil {
			l = m[1] + m[2]
		} else if m := commentedYAML.FindStringSubmatch(l); m != nil {
			l = m[1] + m[2]
		}
		dsLines = append(dsLines, l)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict([]byte(strings.Join(dsLines, "\n")), &ds); err != nil {
		t.Fatalf("%s, its remote variant uncommented: %v", daemonSetPath, err)
	}

	var secretLines []string
	for _, l := range lines[end:] {
		text, _ := strings.CutPrefix(l, "#")
		secretLines = append(secretLines, strings.TrimPrefix(text, " "))
	}
	var secret corev1.Secret
	if err := yaml.UnmarshalStrict([]byte(strings.Join(secretLines, "\n")), &secret); err != nil {
		t.Fatalf("%s, its commented Secret: %v", daemonSetPath, err)
	}
	if secret.Kind != "Secret" || secret.Namespace != ds.Namespace {
		t.Fatalf("the commented %s in %s: want a Secret in the DaemonSet's namespace %s", secret.Kind, secret.Namespace, ds.Namespace)
	}
	return &ds, &secret
}

// probeAdvice is the probe handler the DaemonSet's comments give for the
// remote variant: the one tcpSocket {…} in them.
func probeAdvice(t *testing.T) *corev1.TCPSocketAction {
	t.Helper()
	var prose []string
	for _, l := range strings.Split(string(readFile(t, daemonSetPath)), "\n") {
		if text, ok := strings.CutPrefix(strings.TrimSpace(l), "#"); ok {
			prose = append(prose, strings.TrimSpace(text))
		}
	}
	found := regexp.MustCompile(`tcpSocket:? *(\{[^}]*\})`).FindAllStringSubmatch(strings.Join(prose, " "), -1)
	if len(found) != 1 {
		t.Fatalf("%s: %d tcpSocket {…} in the comments, want the one the probes take scraped from other hosts", daemonSetPath, len(found))
	}
	var a corev1.TCPSocketAction
	if err := yaml.UnmarshalStrict([]byte(found[0][1]), &a); err != nil {
		t.Fatalf("%s: the advice %s: %v", daemonSetPath, found[0][1], err)
	}
	return &a
}

// standInNodeIP is an address of this machine, not a loopback one, of the
// family asked, standing in for the node's (status.hostIP). Without such
// an IPv4 address, 127.0.0.2: Linux gives the loopback all of 127/8, and
// it is not the 127.0.0.1 the probes must not count on. The IPv6 loopback
// has one address: then there is nothing to stand in.
func standInNodeIP(t *testing.T, v6 bool) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() && (n.IP.To4() == nil) == v6 {
			return n.IP.String()
		}
	}
	if !v6 {
		return "127.0.0.2"
	}
	t.Skip("no IPv6 address on this machine but the loopback's")
	return ""
}

// squat holds 127.0.0.1 on a free port, as any local user can, accepting
// and closing every connection; it returns the port.
func squat(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepting sync.WaitGroup
	accepting.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed
			}
			c.Close()
		}
	})
	t.Cleanup(func() {
		l.Close()
		accepting.Wait()
	})
	return l.Addr().(*net.TCPAddr).Port
}

// selfSigned is a certificate for name alone (not the node's address: the
// one Secret's certificate serves every node) and its key, in PEM.
func selfSigned(t *testing.T, name string) (certPEM, keyPEM []byte, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), pool
}

// Contract (security review, finding 9): the DaemonSet's variant for a
// Prometheus on other hosts, applied as its comments say, starts the
// agent; its probes, dialed as kubelet dials them, reach the agent; and
// Prometheus scrapes it as the annotations and comments say. For a
// host-network pod, tcpSocket without host dials the pod's IP, the node's,
// where the agent listens. The advice was host: 127.0.0.1, where nothing
// listens then: kubelet would restart the agent every minute, or whoever
// holds 127.0.0.1:9440 (the squatter here) passes the probes for it.
func TestDaemonSetRemoteVariant(t *testing.T) {
	t.Parallel()
	for _, family := range []string{"IPv4", "IPv6"} {
		t.Run(family, func(t *testing.T) {
			t.Parallel()
			testRemoteVariant(t, standInNodeIP(t, family == "IPv6"))
		})
	}
}

// testRemoteVariant runs TestDaemonSetRemoteVariant on a node whose
// address (status.hostIP, the pod's IP) is nodeIP.
func testRemoteVariant(t *testing.T, nodeIP string) {
	const (
		nodeName = "node1"
		certName = "cri-prober" // Prometheus' tls_config.server_name
		password = "dave123"
		// bcrypt(password), from exporter-toolkit's own tests: what
		// `htpasswd -nBC 10` gives, without htpasswd.
		passwordHash = "$2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq"
	)
	ds, secret := remoteVariant(t)
	pod := &ds.Spec.Template.Spec
	c := agentContainer(t, ds)
	advice := probeAdvice(t)
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil {
			t.Fatal("a probe is missing")
		}
		p.ProbeHandler = corev1.ProbeHandler{TCPSocket: advice}
	}
	checkArgs(t, c)
	if !pod.HostNetwork {
		t.Fatal("hostNetwork: false; the pod's IP would not be the node's")
	}
	var metricsPort int32
	for _, p := range c.Ports {
		if p.Name == "metrics" {
			metricsPort = p.ContainerPort
		}
	}
	// kubelet's values of the variables: the test's node.
	fields := map[string]string{"status.hostIP": nodeIP, "spec.nodeName": nodeName}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && fields[e.ValueFrom.FieldRef.FieldPath] != "":
			env[e.Name] = fields[e.ValueFrom.FieldRef.FieldPath]
		default:
			t.Fatalf("env %s: the test stands in for %v only", e.Name, fields)
		}
	}
	expand := func(s string) string {
		return envRef.ReplaceAllStringFunc(s, func(ref string) string {
			if v, ok := env[envRef.FindStringSubmatch(ref)[1]]; ok {
				return v
			}
			return ref
		})
	}

	// The Secret's volume, as kubelet mounts it: a file per key, the
	// operator's certificate, key and password hash in place of the "...".
	dir := t.TempDir()
	webDir := filepath.Join(dir, "web")
	webMount, mode := "", os.FileMode(0o644)
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == secret.Name {
				webMount = m.MountPath
				if v.Secret.DefaultMode != nil {
					mode = os.FileMode(*v.Secret.DefaultMode)
				}
			}
		}
	}
	if webMount == "" {
		t.Fatalf("Secret %s is not mounted", secret.Name)
	}
	secretKey := func(path string) string {
		rel, err := filepath.Rel(webMount, path)
		if err != nil || !filepath.IsLocal(rel) || secret.StringData[rel] == "" {
			t.Fatalf("%s: not a key of Secret %s mounted at %s", path, secret.Name, webMount)
		}
		return rel
	}
	var webFlag string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--web.config.file="); ok {
			webFlag = v
		}
	}
	configKey := secretKey(webFlag)
	var webConfig struct {
		TLS struct {
			CertFile string `json:"cert_file"`
			KeyFile  string `json:"key_file"`
		} `json:"tls_server_config"`
		Users map[string]string `json:"basic_auth_users"`
	}
	if err := yaml.UnmarshalStrict([]byte(secret.StringData[configKey]), &webConfig); err != nil {
		t.Fatalf("Secret %s, %s: %v", secret.Name, configKey, err)
	}
	if len(webConfig.Users) == 0 {
		t.Fatalf("Secret %s, %s: no basic_auth_users", secret.Name, configKey)
	}
	certPEM, keyPEM, pool := selfSigned(t, certName)
	certKey, keyKey := secretKey(webConfig.TLS.CertFile), secretKey(webConfig.TLS.KeyFile)
	secret.StringData[certKey], secret.StringData[keyKey] = string(certPEM), string(keyPEM)
	// The files where the test mounts them, not under /etc.
	webConfig.TLS.CertFile, webConfig.TLS.KeyFile = filepath.Join(webDir, certKey), filepath.Join(webDir, keyKey)
	user := slices.Sorted(maps.Keys(webConfig.Users))[0]
	for u := range webConfig.Users {
		webConfig.Users[u] = passwordHash
	}
	data, err := yaml.Marshal(&webConfig)
	if err != nil {
		t.Fatal(err)
	}
	secret.StringData[configKey] = string(data)
	if err := os.Mkdir(webDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for key, value := range secret.StringData {
		if err := os.WriteFile(filepath.Join(webDir, key), []byte(value), mode); err != nil {
			t.Fatal(err)
		}
	}

	// The agent with the variant's args as kubelet passes them, paths on
	// the node replaced by the test's, the runtime a fake one. 9440 may be
	// taken here: the manifest's port stands for the squatter's, which it
	// holds on 127.0.0.1 only, free on the node's address for the agent.
	rt := fakeruntime.NewForTest(t)
	if err := os.Mkdir(filepath.Join(dir, "pods"), 0o755); err != nil {
		t.Fatal(err)
	}
	port := squat(t)
	hostPort := func(p int32) int {
		if p != metricsPort {
			t.Fatalf("port %d: the agent listens on port metrics (%d)", p, metricsPort)
		}
		return port
	}
	replace := map[string]func(string) string{
		"runtime-endpoint": func(string) string { return rt.Endpoint() },
		"pod-manifests":    func(string) string { return filepath.Join(dir, "pods") },
		"state-dir":        func(string) string { return filepath.Join(dir, "state") },
		"web.config.file":  func(v string) string { return filepath.Join(webDir, secretKey(v)) },
		"listen": func(v string) string {
			host, p, err := net.SplitHostPort(v)
			if err != nil {
				t.Fatalf("--listen=%s on node %s: %v", v, nodeIP, err)
			}
			n, _ := strconv.Atoi(p)
			return net.JoinHostPort(host, strconv.Itoa(hostPort(int32(n))))
		},
	}
	args := []string{"run", "--containerd-address=none"}
	for _, a := range c.Args[1:] {
		a = expand(a)
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if f, ok := replace[name]; ok {
			a = "--" + name + "=" + f(value)
		}
		args = append(args, a)
	}
	p := startAgent(t, nil, rt, args)
	p.waitLog(probingLine, 30*time.Second) // it listens before it logs this

	// The probes as kubelet runs a tcpSocket one: it dials host, or the
	// pod's IP (the node's, with hostNetwork), and a connection passes.
	// The TLS handshake then tells the agent (its key) from whoever else
	// holds that address.
	for _, probe := range []struct {
		kind string
		*corev1.Probe
	}{{"readiness", c.ReadinessProbe}, {"liveness", c.LivenessProbe}} {
		host, probePort := probe.TCPSocket.Host, probe.TCPSocket.Port.IntVal
		if host == "" {
			host = nodeIP
		}
		if probe.TCPSocket.Port.Type == intstr.String {
			probePort = 0
			for _, cp := range c.Ports {
				if cp.Name == probe.TCPSocket.Port.StrVal {
					probePort = cp.ContainerPort
				}
			}
		}
		addr := net.JoinHostPort(host, strconv.Itoa(hostPort(probePort)))
		conn, err := net.DialTimeout("tcp", addr, time.Duration(max(probe.TimeoutSeconds, 1))*time.Second)
		if err != nil {
			t.Errorf("the %s probe, tcpSocket {port: %s, host: %q}, dials %s: %v; kubelet fails it (and restarts the agent)", probe.kind, &probe.TCPSocket.Port, probe.TCPSocket.Host, addr, err)
			continue
		}
		tconn := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: certName})
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		if err := tconn.HandshakeContext(ctx); err != nil {
			t.Errorf("the %s probe, tcpSocket {port: %s, host: %q}, dials %s, where something other than the agent answers (%v): it passes the probe for the agent", probe.kind, &probe.TCPSocket.Port, probe.TCPSocket.Host, addr, err)
		}
		cancel()
		tconn.Close()
	}

	// Prometheus, from the annotations: https to the pod's IP at their
	// port, tls_config with the CA and server_name, basic auth; the Host
	// header is the target, or the node's name in a static target.
	ann := ds.Spec.Template.Annotations
	annPort, _ := strconv.Atoi(ann["prometheus.io/port"])
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/scheme"] != "https" {
		t.Errorf("annotations %v: want prometheus.io/scrape true and scheme https", ann)
	}
	target := net.JoinHostPort(nodeIP, strconv.Itoa(hostPort(int32(annPort))))
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: certName}}}
	defer client.CloseIdleConnections()
	scrape := func(host string, auth bool) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+target+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if auth {
			req.SetBasicAuth(user, password)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("scrape %s: %v", target, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	if code, body := scrape(target, true); code != http.StatusOK || !strings.Contains(body, "cri_prober_build_info") {
		t.Errorf("scrape of %s with basic auth: %d, want 200 and the agent's metrics:\n%.500s", target, code, body)
	}
	if code, _ := scrape(target, false); code != http.StatusUnauthorized {
		t.Errorf("scrape of %s without basic auth: %d, want 401", target, code)
	}
	if code, _ := scrape(net.JoinHostPort(nodeName, strconv.Itoa(port)), true); code != http.StatusOK {
		t.Errorf("scrape with Host %s (--web.allowed-hosts): %d, want 200", nodeName, code)
	}
	if code, _ := scrape("rebinding.example", true); code != http.StatusMisdirectedRequest {
		t.Errorf("scrape with Host rebinding.example: %d, want 421", code)
	}

	if err := p.stop(); err != nil {
		t.Errorf("the agent's exit on SIGTERM: %v", err)
	}
}
