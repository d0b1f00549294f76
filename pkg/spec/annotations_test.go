package spec

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An annotation probe goes to its own pod: a host or a Host header would
// let whoever creates a container aim the agent anywhere from the node
// (the node's cloud metadata, its loopback). Each is an error naming the
// annotation, the container and the field, and the flag that allows it;
// the container is then not probed at all. With --annotation-probe-hosts
// =any they are accepted, as in a manifest.
func TestAnnotationProbesArePinnedToThePod(t *testing.T) {
	const allow = "or let annotations name hosts with run --annotation-probe-hosts=any"
	tests := []struct {
		name     string
		key      string
		probe    string
		wantErrs []string
	}{
		{"an HTTP host", ReadinessAnnotation,
			`{"httpGet":{"host":"127.0.0.1","port":18080,"path":"/computeMetadata/v1/instance/service-accounts/default/token","httpHeaders":[{"name":"Metadata-Flavor","value":"Google"}]}}`,
			[]string{"annotations: pod ns/p: container app: cri-prober.io/readiness-probe.httpGet.host: Forbidden: annotation probes go to their own pod (its IP, or 127.0.0.1 in its network namespace): remove the host, " + allow}},
		{"a Host header, in any case", LivenessAnnotation,
			`{"httpGet":{"port":8080,"httpHeaders":[{"name":"X-Trace","value":"1"},{"name":"host","value":"metadata.google.internal"}]}}`,
			[]string{"annotations: pod ns/p: container app: cri-prober.io/liveness-probe.httpGet.httpHeaders[1].name: Forbidden: annotation probes go to their own pod, under its address: remove the Host header, " + allow}},
		{"a TCP host (a port scanner)", StartupAnnotation,
			`{"tcpSocket":{"host":"10.0.0.1","port":22}}`,
			[]string{"annotations: pod ns/p: container app: cri-prober.io/startup-probe.tcpSocket.host: Forbidden: annotation probes go to their own pod (its IP, or 127.0.0.1 in its network namespace): remove the host, " + allow}},
		{"the pod's own address: accepted", ReadinessAnnotation, `{"httpGet":{"port":8080,"httpHeaders":[{"name":"X-Trace","value":"1"}]}}`, nil},
		{"gRPC and exec have no host", LivenessAnnotation, `{"grpc":{"port":5000}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			annotations := map[string]string{tt.key: tt.probe}
			c, errs := ContainerFromAnnotations("ns", "p", "app", annotations, AnnotationProbeHostsPod)
			require.Len(t, errs, len(tt.wantErrs), "%v", errs)
			for i, want := range tt.wantErrs {
				assert.Equal(t, want, errs[i].Error())
			}
			if len(errs) > 0 {
				assert.Nil(t, c, "not probed at all")
			}
			_, errs = ContainerFromAnnotations("ns", "p", "app", annotations, "")
			assert.Len(t, errs, len(tt.wantErrs), "pinned unless said otherwise")

			c, errs = ContainerFromAnnotations("ns", "p", "app", annotations, AnnotationProbeHostsAny)
			assert.Empty(t, errs, "any host")
			assert.NotNil(t, c)
		})
	}

	// A manifest is the operator's: any host, as kubelet.
	r := loadData("pods.yaml", []byte(`apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: app
    image: x
    readinessProbe: {httpGet: {host: 127.0.0.1, port: 8080, httpHeaders: [{name: Host, value: example.com}]}}
`), nil)
	assert.Empty(t, r.Errors)
	require.Len(t, r.Pods, 1)
}

// Nothing an annotation holds is echoed whole: a 200 KB value, key or
// field name costs each problem at most 1 KiB of text (which goes to every
// /api/v1/pods response, the log and cri-prober status), and a value of
// thousands of mistakes at most maxProblems problems and a count. Fails on
// the old code: the JSON error, the method and the unknown key held the
// value whole (200 KB, 200 KB and 400 KB), and every unknown key of a
// sandbox was a problem of its own (5,000 here).
func TestAnnotationEchoesAreBounded(t *testing.T) {
	long := strings.Repeat("A", 200<<10)
	probe := `{"httpGet":{"port":8080}}`
	var manyUnknown strings.Builder
	manyUnknown.WriteString(`{"tcpSocket":{"port":80}`)
	for i := range 20000 {
		manyUnknown.WriteString(`,"u` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i/26) + `":1`)
	}
	manyUnknown.WriteString("}")

	containers := map[string]map[string]string{
		"invalid JSON":                        {ReadinessAnnotation: `{"httpGet":` + long},
		"a huge number":                       {ReadinessAnnotation: `{"periodSeconds":` + strings.Repeat("9", 200<<10) + `}`},
		"invalid extensions JSON":             {ReadinessAnnotation: probe, ExtensionsAnnotation: `{"readinessProbe":` + long},
		"an unknown probe name in extensions": {ReadinessAnnotation: probe, ExtensionsAnnotation: `{"` + long + `":{}}`},
		"a method":                            {ReadinessAnnotation: probe, ExtensionsAnnotation: `{"readinessProbe":{"httpGet":{"method":"` + long + `"}}}`},
		"a regexp for HEAD":                   {ReadinessAnnotation: probe, ExtensionsAnnotation: `{"readinessProbe":{"httpGet":{"method":"HEAD","failIfBodyNotMatchesRegexp":"` + strings.Repeat("(", 1000) + `"}}}`},
		"an unknown key":                      {AnnotationPrefix + long: "x"},
		"an unknown field":                    {ReadinessAnnotation: `{"httpGet":{"port":8080},"` + long + `":1}`},
		"a header name":                       {ReadinessAnnotation: `{"httpGet":{"port":8080,"httpHeaders":[{"name":"` + long + ` ","value":"v"}]}}`},
		"a port name":                         {ReadinessAnnotation: `{"tcpSocket":{"port":"` + long + `"}}`},
		"a scheme":                            {ReadinessAnnotation: `{"httpGet":{"port":8080,"scheme":"` + long + `"}}`},
		"thousands of unknown fields":         {ReadinessAnnotation: manyUnknown.String()},
	}
	sandboxes := map[string]map[string]string{
		"a restart policy": {RestartPolicyAnnotation: long},
		"a grace period":   {GracePeriodAnnotation: long},
		"a probe network":  {ProbeNetworkAnnotation: long},
		"an unknown key":   {AnnotationPrefix + long: "x"},
		"thousands of unknown keys": func() map[string]string {
			m := map[string]string{}
			for i := range 5000 {
				m[AnnotationPrefix+strings.Repeat("k", i)] = "x"
			}
			return m
		}(),
	}
	check := func(t *testing.T, errs []*Error) {
		t.Helper()
		require.NotEmpty(t, errs)
		assert.LessOrEqual(t, len(errs), maxProblems+1, "at most maxProblems and a count")
		for _, e := range errs {
			assert.LessOrEqual(t, len(e.Error()), 1<<10, "%.300s", e.Error())
			assert.LessOrEqual(t, len(e.Field), 2*maxQuoted, "%.300s", e.Field)
		}
	}
	for name, annotations := range containers {
		t.Run("container: "+name, func(t *testing.T) {
			c, errs := ContainerFromAnnotations("ns", "p", "app", annotations, AnnotationProbeHostsPod)
			assert.Nil(t, c)
			check(t, errs)
		})
	}
	for name, annotations := range sandboxes {
		t.Run("sandbox: "+name, func(t *testing.T) {
			_, errs := PodPolicyFromAnnotations("ns", "p", annotations)
			check(t, errs)
		})
	}

	t.Run("the count says how many more", func(t *testing.T) {
		_, errs := ContainerFromAnnotations("ns", "p", "app", map[string]string{ReadinessAnnotation: manyUnknown.String()}, AnnotationProbeHostsPod)
		require.Len(t, errs, maxProblems+1) // the decoder itself stops at 100
		assert.Equal(t, "annotations: pod ns/p: container app: and 90 more problems in these annotations, not shown: fix the ones shown, then see the rest", errs[maxProblems].Error())
	})
}

// An Error's text is at most 1 KiB whatever it is made of (a runtime's
// pod or container name is not bounded either).
func TestErrorTextIsBounded(t *testing.T) {
	long := strings.Repeat("n", 300<<10)
	e := &Error{Source: SourceAnnotations, Namespace: long, Pod: long, Container: long, Field: long, Detail: long}
	assert.LessOrEqual(t, len(e.Error()), 1<<10)
	assert.True(t, strings.HasPrefix(e.Error(), "annotations: pod nnn"))
	assert.Contains(t, e.Error(), "more bytes cut)")
}
