package spec

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cri-prober/cri-prober/test/inputs"
)

// Each bad manifest gives exactly these errors, at the line of the field
// concerned (file prefix omitted).
func TestLoadBadManifests(t *testing.T) {
	lines := map[string]int{"rules-without-policy": 6, "init-container-lifecycle": 8, "sleep-too-long": 11, "active-deadline": 5, "bad-exit-operator": 11, "bad-header": 13, "bad-restart-policy": 7, "bad-probe-network": 8, "bad-scheme": 11, "duplicate-container": 7, "exec-empty": 11, "grpc-port-zero": 11, "init-container-probe": 8, "liveness-grace-zero": 12, "liveness-success-threshold": 12, "negative-initial-delay": 12, "negative-period": 12, "no-handler": 10, "not-yaml": 3, "port-out-of-range": 11, "readiness-grace": 12, "startup-success-threshold": 12, "two-handlers": 12, "type-error": 12, "unknown-field": 10, "wrong-kind": 2}
	tests := map[string][]string{
		"no-handler":                 {": pod shop/no-handler: container app: spec.containers[0].livenessProbe: Required value: must specify a handler type"},
		"two-handlers":               {": pod shop/two-handlers: container app: spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"},
		"liveness-success-threshold": {": pod shop/liveness-success-threshold: container app: spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"},
		"startup-success-threshold":  {": pod shop/startup-success-threshold: container app: spec.containers[0].startupProbe.successThreshold: Invalid value: 3: must be 1"},
		"readiness-grace":            {": pod shop/readiness-grace: container app: spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes"},
		"liveness-grace-zero":        {": pod shop/liveness-grace-zero: container app: spec.containers[0].livenessProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0"},
		"negative-period":            {": pod shop/negative-period: container app: spec.containers[0].livenessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0"},
		"negative-initial-delay":     {": pod shop/negative-initial-delay: container app: spec.containers[0].readinessProbe.initialDelaySeconds: Invalid value: -5: must be greater than or equal to 0"},
		"port-out-of-range":          {": pod shop/port-out-of-range: container app: spec.containers[0].livenessProbe.httpGet.port: Invalid value: 70000: must be between 1 and 65535, inclusive"},
		"grpc-port-zero":             {": pod shop/grpc-port-zero: container app: spec.containers[0].livenessProbe.grpc.port: Invalid value: 0: must be between 1 and 65535, inclusive"},
		"bad-scheme":                 {`: pod shop/bad-scheme: container app: spec.containers[0].livenessProbe.httpGet.scheme: Unsupported value: "FTP": supported values: "HTTP", "HTTPS"`},
		"bad-header":                 {`: pod shop/bad-header: container app: spec.containers[0].livenessProbe.httpGet.httpHeaders: Invalid value: "bad header": a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')`},
		"exec-empty":                 {": pod shop/exec-empty: container app: spec.containers[0].livenessProbe.exec.command: Required value"},
		"unknown-field":              {`: pod shop/unknown-field: unknown field "spec.containers[0].livenessProb": remove it, or correct its name: did you mean "livenessProbe"?`},
		"type-error":                 {`: spec.containers[0].livenessProbe.periodSeconds: Invalid value: a string: must be a whole number (int32): write the number without quotes`},
		"bad-restart-policy":         {`: pod shop/bad-restart-policy: spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`},
		"bad-probe-network":          {`: pod shop/bad-probe-network: metadata.annotations[cri-prober.io/probe-network]: Unsupported value: "inside": supported values: "node", "pod"`},
		"wrong-kind":                 {`: kind Deployment (apps/v1): only Pods are read, as kubelet reads static pods: the containers of this Deployment are neither run nor probed; write them in a Pod manifest (apiVersion: v1, kind: Pod), or move the file out of the directory`},
		"not-yaml":                   {`: not valid YAML or JSON: did not find expected ',' or ']': a "[" is not closed, or a comma is missing between its items: close it or add the comma`},
		"init-container-probe":       {": pod shop/init-container-probe: container setup: spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"},
		"duplicate-container":        {`: pod shop/duplicate-container: container app: spec.containers[1].name: Duplicate value: "app"`},
		"rules-without-policy":       {`: pod shop/rules-without-policy: container app: spec.containers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used`},
		"init-container-lifecycle":   {`: pod shop/init-container-lifecycle: container setup: spec.initContainers[0].lifecycle: Forbidden: may not be set for init containers without restartPolicy=Always`},
		"sleep-too-long":             {`: pod shop/sleep-too-long: container app: spec.containers[0].lifecycle.preStop.sleep: Invalid value: 10: must be non-negative and less than terminationGracePeriodSeconds (5)`},
		"active-deadline":            {`: pod shop/active-deadline: spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive`},
		"bad-exit-operator":          {`: pod shop/bad-exit-operator: container app: spec.containers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value: "Equals": supported values: "In", "NotIn"`},
	}
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	require.Len(t, files, len(tests), "every bad file has a row")
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join("testdata/bad", name+".yaml")
			r := load(file, nil)
			pods, errs := r.Pods, r.Errors
			assert.Empty(t, pods, "a pod with an error is not used")
			var got []string
			for _, e := range errs {
				msg := e.Error()
				at := fmt.Sprintf("%s:%d:", file, lines[name])
				require.True(t, strings.HasPrefix(msg, at), "names the file and the field's line %s: %s", at, msg)
				got = append(got, strings.TrimPrefix(msg, at[:len(at)-1]))
			}
			require.Len(t, got, len(want), "%q", got)
			for i := range want {
				assert.Contains(t, got[i], want[i])
			}
		})
	}
}

// Fields kubelet honours without an API server are accepted and honoured:
// readiness gates (the pod is never Ready: said as a warning), an active
// deadline, RestartAllContainers rules, a stop signal (ignored, as kubelet
// 1.36 ignores it: a warning).
func TestLoadWhatKubeletHonours(t *testing.T) {
	r := load("testdata/good/readiness-gates.yaml", nil)
	require.Empty(t, r.Errors)
	require.Len(t, r.Pods, 1)
	require.Len(t, r.Warnings, 1)
	assert.Contains(t, r.Warnings[0].Error(), "testdata/good/readiness-gates.yaml:5: pod shop/readiness-gates: spec.readinessGates: Invalid value: \"example.com/lb\": nothing sets pod conditions without an API server, so the pod is not Ready until")

	r = load("testdata/good/restart-all-containers.yaml", nil)
	require.Empty(t, r.Errors)
	require.Len(t, r.Pods, 1)
	app, _ := r.Pods[0].Container("app")
	assert.True(t, app.RestartsAll(42))
	assert.False(t, app.RestartsAll(1))
	assert.True(t, app.ShouldRestart(corev1.RestartPolicyNever, 42), "restarted (with every other container)")

	r = loadData("stop.yaml", []byte(`apiVersion: v1
kind: Pod
metadata: {name: stop, namespace: shop}
spec:
  activeDeadlineSeconds: 60
  containers:
  - name: app
    image: localhost/busybox:test
    lifecycle:
      stopSignal: SIGUSR1
`), nil)
	require.Empty(t, r.Errors)
	require.Len(t, r.Warnings, 1)
	assert.Contains(t, r.Warnings[0].Error(), "stop.yaml:10: pod shop/stop: container app: spec.containers[0].lifecycle.stopSignal: Invalid value: \"SIGUSR1\": ignored, as kubelet 1.36 ignores it")
	assert.Equal(t, int64(60), *r.Pods[0].Object.Spec.ActiveDeadlineSeconds)
}

func TestLoadGoodManifest(t *testing.T) {
	r := load("testdata/good/pods.yaml", nil)
	pods, errs := r.Pods, r.Errors
	require.Empty(t, errs)
	require.Len(t, pods, 2)

	web := pods[0]
	assert.Equal(t, "testdata/good/pods.yaml:2", web.Source, "the first line of content, past the comment")
	assert.Equal(t, "shop", web.Namespace)
	assert.Equal(t, "web", web.Name)
	assert.Equal(t, "6c0a3e8e-0000-4000-8000-000000000001", web.UID)
	assert.Equal(t, corev1.RestartPolicyOnFailure, web.RestartPolicy)
	assert.Equal(t, int64(60), web.TerminationGracePeriodSeconds)
	require.Len(t, web.Containers, 3, "every container, init containers first")
	assert.Equal(t, []string{"proxy", "setup", "app"}, []string{web.Containers[0].Name, web.Containers[1].Name, web.Containers[2].Name})
	assert.Equal(t, []Kind{Sidecar, Init, Regular}, []Kind{web.Containers[0].Kind, web.Containers[1].Kind, web.Containers[2].Kind})

	app, ok := web.Container("app")
	require.True(t, ok)
	assert.Equal(t, Regular, app.Kind)
	live := app.Liveness
	assert.Equal(t, int32(10), live.PeriodSeconds, "defaulted")
	assert.Equal(t, int32(1), live.TimeoutSeconds)
	assert.Equal(t, int32(1), live.SuccessThreshold)
	assert.Equal(t, int32(5), live.FailureThreshold)
	assert.Equal(t, corev1.URISchemeHTTP, live.HTTPGet.Scheme)
	assert.Equal(t, int64(5), *live.TerminationGracePeriodSeconds)
	port, err := ResolvePort(live.HTTPGet.Port, app.Ports)
	assert.NoError(t, err)
	assert.Equal(t, 8080, port)
	assert.Equal(t, int32(10), app.Readiness.PeriodSeconds, "an explicit 0 means the default")
	assert.Equal(t, int32(3), app.Startup.FailureThreshold)
	assert.Equal(t, []corev1.EnvVar{{Name: "A", Value: "script"}}, app.Env)

	proxy, ok := web.Container("proxy")
	require.True(t, ok)
	assert.Equal(t, Sidecar, proxy.Kind)
	assert.NotNil(t, proxy.Readiness)

	worker := pods[1]
	assert.Equal(t, "testdata/good/pods.yaml:36", worker.Source, "the document's first line")
	assert.Equal(t, "default", worker.Namespace, "defaulted")
	assert.Equal(t, corev1.RestartPolicyAlways, worker.RestartPolicy)
	assert.Equal(t, int64(30), worker.TerminationGracePeriodSeconds)
	assert.False(t, worker.Containers[0].HasProbes())
}

func TestSplitDocuments(t *testing.T) {
	docs := splitDocuments([]byte("---\n# only a comment\n---\na: 1\n--- # trailing\nb: 2\n---\n\n"))
	require.Len(t, docs, 2)
	assert.Equal(t, 4, docs[0].line)
	assert.Equal(t, "a: 1\n", string(docs[0].data))
	assert.Equal(t, 6, docs[1].line)
}

// A line of any length is read whole: bufio.Scanner's 16 MiB limit used to
// end the file there silently, dropping every document after it. Fails on
// the old code: the second pod is lost.
func TestLoadBytesLongLine(t *testing.T) {
	long := "# " + strings.Repeat("x", 16<<20) + "\n"
	data := inputs.WebPod(3) + "---\n" + long + "---\n" + strings.Replace(inputs.WebPod(3), "name: web", "name: db", 1)
	pods, errs := loadPods("pods.yaml", []byte(data))
	assert.Empty(t, errs)
	require.Len(t, pods, 2)
	assert.Equal(t, "pods.yaml:14", pods[1].Source, "lines counted past the long one")
}

// CRLF files split as before: bufio.ScanLines dropped the \r.
func TestSplitDocumentsCRLF(t *testing.T) {
	docs := splitDocuments([]byte("a: 1\r\n---\r\nb: 2\r\nc: 3"))
	require.Len(t, docs, 2)
	assert.Equal(t, "a: 1\n", string(docs[0].data))
	assert.Equal(t, "b: 2\nc: 3\n", string(docs[1].data))
	assert.Equal(t, 3, docs[1].line)
}

func TestContainerFromAnnotations(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		wantErrs    []string
		check       func(t *testing.T, c *Container)
	}{
		{
			name:        "no probe annotations",
			annotations: map[string]string{"other": "x"},
			check:       func(t *testing.T, c *Container) { assert.Nil(t, c) },
		},
		{
			name: "all three, defaulted",
			annotations: map[string]string{
				LivenessAnnotation:  `{"httpGet":{"port":8080,"path":"/healthz"},"failureThreshold":1}`,
				ReadinessAnnotation: `{"tcpSocket":{"port":8080},"periodSeconds":2}`,
				StartupAnnotation:   `{"exec":{"command":["cat","/tmp/started"]}}`,
			},
			check: func(t *testing.T, c *Container) {
				require.NotNil(t, c)
				assert.Equal(t, "app", c.Name)
				assert.Equal(t, int32(1), c.Liveness.FailureThreshold)
				assert.Equal(t, int32(10), c.Liveness.PeriodSeconds)
				assert.Equal(t, intstr.FromInt32(8080), c.Readiness.TCPSocket.Port)
				assert.Equal(t, int32(2), c.Readiness.PeriodSeconds)
				assert.Equal(t, []string{"cat", "/tmp/started"}, c.Startup.Exec.Command)
			},
		},
		{
			name:        "bad JSON",
			annotations: map[string]string{LivenessAnnotation: `{"httpGet":`},
			wantErrs:    []string{"annotations: pod ns/p: container app: cri-prober.io/liveness-probe: not a JSON Probe: "},
		},
		{
			name:        "unknown field",
			annotations: map[string]string{ReadinessAnnotation: `{"tcpSocket":{"port":80},"periodSecond":2}`},
			wantErrs:    []string{`annotations: pod ns/p: container app: cri-prober.io/readiness-probe: unknown field "periodSecond"`},
		},
		{
			name:        "invalid probe",
			annotations: map[string]string{LivenessAnnotation: `{"exec":{"command":["true"]},"successThreshold":2}`},
			wantErrs:    []string{"annotations: pod ns/p: container app: cri-prober.io/liveness-probe.successThreshold: Invalid value: 2: must be 1"},
		},
		{
			// kubelet accepts it and the probe errors at every run: inert,
			// with a warning, the container's other probes unaffected.
			name: "named port: that probe inert",
			annotations: map[string]string{
				ReadinessAnnotation: `{"httpGet":{"port":"http"}}`,
				LivenessAnnotation:  `{"exec":{"command":["true"]}}`,
			},
			check: func(t *testing.T, c *Container) {
				require.NotNil(t, c)
				assert.NotNil(t, c.Readiness)
				assert.NotNil(t, c.Liveness)
				require.Len(t, c.Warnings, 1)
				assert.Contains(t, c.Warnings[0].Error(), `annotations: pod ns/p: container app: cri-prober.io/readiness-probe.httpGet.port: Invalid value: "http": named ports need a Pod manifest that declares them: this probe errors at every run and never changes its result; use a port number in annotations`)
			},
		},
		{
			name:        "typo in the key",
			annotations: map[string]string{"cri-prober.io/livenes-probe": `{"exec":{"command":["true"]}}`},
			wantErrs:    []string{"cri-prober.io/livenes-probe: unknown annotation; on a container config cri-prober reads cri-prober.io/liveness-probe, cri-prober.io/readiness-probe, cri-prober.io/startup-probe"},
		},
		{
			name:        "sandbox key on a container",
			annotations: map[string]string{RestartPolicyAnnotation: "Never"},
			wantErrs:    []string{"cri-prober.io/restart-policy: belongs on the pod sandbox config, not on a container config"},
		},
		{
			name: "one bad probe voids the container's others",
			annotations: map[string]string{
				LivenessAnnotation:  `{"exec":{"command":["true"]}}`,
				ReadinessAnnotation: `{}`,
			},
			wantErrs: []string{"cri-prober.io/readiness-probe: Required value: must specify a handler type"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, errs := ContainerFromAnnotations("ns", "p", "app", tt.annotations, AnnotationProbeHostsPod)
			require.Len(t, errs, len(tt.wantErrs), "%v", errs)
			for i, want := range tt.wantErrs {
				assert.Contains(t, errs[i].Error(), want)
			}
			if len(errs) > 0 {
				assert.Nil(t, c)
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

func TestPodPolicyFromAnnotations(t *testing.T) {
	p, errs := PodPolicyFromAnnotations("ns", "p", nil)
	assert.Empty(t, errs)
	assert.Equal(t, PodPolicy{RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: 30}, p)

	p, errs = PodPolicyFromAnnotations("ns", "p", map[string]string{RestartPolicyAnnotation: "Never", GracePeriodAnnotation: "5"})
	assert.Empty(t, errs)
	assert.Equal(t, PodPolicy{RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: 5}, p)

	p, errs = PodPolicyFromAnnotations("ns", "p", map[string]string{RestartPolicyAnnotation: "Sometimes", GracePeriodAnnotation: "soon", LivenessAnnotation: "{}"})
	require.Len(t, errs, 3)
	assert.Contains(t, errs[0].Error(), "annotations: pod ns/p: cri-prober.io/liveness-probe: belongs on a container config, not on a pod sandbox config")
	assert.Contains(t, errs[1].Error(), `cri-prober.io/restart-policy: Unsupported value: "Sometimes"`)
	assert.Contains(t, errs[2].Error(), `cri-prober.io/termination-grace-period-seconds: Invalid value: "soon": must be a whole number of seconds`)
	assert.Equal(t, corev1.RestartPolicyAlways, p.RestartPolicy, "defaults stand when the value is bad")

	p, errs = PodPolicyFromAnnotations("ns", "p", map[string]string{ProbeNetworkAnnotation: "pod"})
	assert.Empty(t, errs)
	assert.Equal(t, ProbeNetworkPod, p.ProbeNetwork)
	p, errs = PodPolicyFromAnnotations("ns", "p", map[string]string{ProbeNetworkAnnotation: "inside"})
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), `cri-prober.io/probe-network: Unsupported value: "inside": supported values: "node", "pod"`)
	assert.Empty(t, p.ProbeNetwork)
}

// A probe naming a port the container does not declare is accepted, as
// kubelet accepts it, with a warning at the field's line: that probe is
// inert, the pod and the container's other probes work.
func TestNamedPortMissingIsAWarning(t *testing.T) {
	r := load("testdata/named-port-missing.yaml", nil)
	pods, errs := r.Pods, r.Errors
	require.Empty(t, errs)
	require.Len(t, pods, 1)
	app, ok := pods[0].Container("app")
	require.True(t, ok)
	require.NotNil(t, app.Liveness)
	require.Len(t, app.Warnings, 1)
	assert.Equal(t, `testdata/named-port-missing.yaml:13: pod shop/named-port-missing: container app: spec.containers[0].livenessProbe.httpGet.port: Invalid value: "http": no port named "http" among the container's ports: this probe errors at every run and never changes its result, as under kubelet; declare the port or use its number`,
		app.Warnings[0].Error())
	_, err := ResolvePort(app.Liveness.HTTPGet.Port, app.Ports)
	assert.EqualError(t, err, `strconv.Atoi: parsing "http": invalid syntax`, "kubelet's error, at every run")
}

// Container restart policies, rules and lifecycle hooks load as kubelet
// 1.36 validation accepts them.
func TestLoadPolicies(t *testing.T) {
	r := load("testdata/good/policies.yaml", nil)
	pods, errs := r.Pods, r.Errors
	require.Empty(t, errs)
	require.Len(t, pods, 1)
	p := pods[0]
	assert.Equal(t, corev1.RestartPolicyNever, p.RestartPolicy)
	setup, _ := p.Container("setup")
	assert.Equal(t, Init, setup.Kind)
	assert.Equal(t, corev1.ContainerRestartPolicyOnFailure, *setup.RestartPolicy)
	proxy, _ := p.Container("proxy")
	assert.Equal(t, Sidecar, proxy.Kind)
	require.NotNil(t, proxy.PostStart())
	assert.Equal(t, "/", proxy.PostStart().HTTPGet.Path, "defaulted as the API server defaults it")
	assert.Equal(t, corev1.URISchemeHTTP, proxy.PostStart().HTTPGet.Scheme)
	app, _ := p.Container("app")
	assert.Len(t, app.RestartPolicyRules, 1)
	assert.Equal(t, int64(3), app.PreStop().Sleep.Seconds)
	assert.Nil(t, app.PostStart())
}

// kubelet 1.36's ContainerShouldRestart: rules by exit code, then the
// container's policy, then the pod's (ported from pkg/api/v1/pod tests).
func TestShouldRestart(t *testing.T) {
	always, onFailure, never := corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever
	rule := func(op corev1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) []corev1.ContainerRestartRule {
		return []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart, ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}}
	}
	tests := []struct {
		name       string
		container  *Container
		pod        corev1.RestartPolicy
		exitCode   int32
		want       bool
		wantAtKill bool
	}{
		{name: "no spec: the pod's Always", container: nil, pod: corev1.RestartPolicyAlways, exitCode: 0, want: true, wantAtKill: true},
		{name: "the pod's OnFailure, exit 0", container: &Container{}, pod: corev1.RestartPolicyOnFailure, exitCode: 0, want: false, wantAtKill: true},
		{name: "the pod's OnFailure, exit 1", container: &Container{}, pod: corev1.RestartPolicyOnFailure, exitCode: 1, want: true, wantAtKill: true},
		{name: "the pod's Never", container: &Container{}, pod: corev1.RestartPolicyNever, exitCode: 1, want: false, wantAtKill: false},
		{name: "the container's Always beats the pod's Never", container: &Container{RestartPolicy: &always}, pod: corev1.RestartPolicyNever, exitCode: 0, want: true, wantAtKill: true},
		{name: "the container's Never beats the pod's Always", container: &Container{RestartPolicy: &never}, pod: corev1.RestartPolicyAlways, exitCode: 1, want: false, wantAtKill: false},
		{name: "the container's OnFailure, exit 0", container: &Container{RestartPolicy: &onFailure}, pod: corev1.RestartPolicyAlways, exitCode: 0, want: false, wantAtKill: true},
		{name: "a rule In matches", container: &Container{RestartPolicy: &never, RestartPolicyRules: rule(corev1.ContainerRestartRuleOnExitCodesOpIn, 42)}, pod: corev1.RestartPolicyNever, exitCode: 42, want: true, wantAtKill: false},
		{name: "a rule In does not match: the container's policy", container: &Container{RestartPolicy: &never, RestartPolicyRules: rule(corev1.ContainerRestartRuleOnExitCodesOpIn, 42)}, pod: corev1.RestartPolicyAlways, exitCode: 1, want: false, wantAtKill: false},
		{name: "a rule NotIn matches", container: &Container{RestartPolicy: &never, RestartPolicyRules: rule(corev1.ContainerRestartRuleOnExitCodesOpNotIn, 0)}, pod: corev1.RestartPolicyNever, exitCode: 3, want: true, wantAtKill: false},
		{name: "a rule NotIn does not match", container: &Container{RestartPolicy: &never, RestartPolicyRules: rule(corev1.ContainerRestartRuleOnExitCodesOpNotIn, 0)}, pod: corev1.RestartPolicyAlways, exitCode: 0, want: false, wantAtKill: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.container.ShouldRestart(tt.pod, tt.exitCode))
			assert.Equal(t, tt.wantAtKill, tt.container.RestartsAfterKill(tt.pod), "after a probe kill: no exit code, no rules")
		})
	}
}

// A container that declares no port at all: the same warning, not the
// annotations' hint.
func TestNamedPortWithNoPortsDeclared(t *testing.T) {
	pods, errs := loadPods("pod.yaml", []byte(`apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  containers:
  - name: app
    image: localhost/busybox:test
    livenessProbe:
      tcpSocket: {port: web}
`))
	require.Empty(t, errs)
	app, _ := pods[0].Container("app")
	require.Len(t, app.Warnings, 1)
	assert.Contains(t, app.Warnings[0].Error(), `pod.yaml:9: pod shop/web: container app: spec.containers[0].livenessProbe.tcpSocket.port: Invalid value: "web": no port named "web" among the container's ports`)
}
