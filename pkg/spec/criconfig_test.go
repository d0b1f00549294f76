package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/results"
)

func TestLoadCRIConfigGood(t *testing.T) {
	r := load("testdata/cri/good-container.json", nil)
	require.Empty(t, r.Errors)
	require.Empty(t, r.Warnings)
	require.Len(t, r.Configs, 1)
	c := r.Configs[0]
	assert.Equal(t, CRIContainerConfig, c.Kind)
	assert.Equal(t, "web", c.Container)
	require.NotNil(t, c.Spec)
	assert.Equal(t, int32(2), c.Spec.Readiness.PeriodSeconds)
	assert.Equal(t, int32(5), c.Spec.Liveness.FailureThreshold, "as the agent reads it: defaulted")
	assert.Equal(t, int32(10), c.Spec.Liveness.PeriodSeconds)
	assert.Equal(t, 500*time.Millisecond, c.Spec.Extension(results.Readiness).StartInterval.Duration)

	r = load("testdata/cri/good-sandbox.json", nil)
	require.Empty(t, r.Errors)
	require.Len(t, r.Configs, 1)
	c = r.Configs[0]
	assert.Equal(t, CRIPodSandboxConfig, c.Kind)
	assert.Equal(t, "demo", c.Namespace)
	assert.Equal(t, "web", c.Pod)
	assert.Equal(t, PodPolicy{RestartPolicy: corev1.RestartPolicyOnFailure, TerminationGracePeriodSeconds: 5}, c.Policy)

	r = load("testdata/cri/good-container.yaml", nil)
	require.Empty(t, r.Errors)
	require.Len(t, r.Configs, 1)
	assert.Equal(t, int32(30), r.Configs[0].Spec.Startup.FailureThreshold)

	// From standard input, a crictl config is found to be one too.
	data, err := os.ReadFile("testdata/cri/good-sandbox.json")
	require.NoError(t, err)
	r = loadData("<stdin>", data, nil)
	require.Empty(t, r.Errors)
	require.Len(t, r.Configs, 1)
	assert.Equal(t, CRIPodSandboxConfig, r.Configs[0].Kind)
	assert.True(t, r.OK())
}

// Every problem is at the line of the annotation's value, or of the field
// inside it when it spans lines, with the field inside the annotation.
func TestLoadCRIConfigBad(t *testing.T) {
	const crictlRefuses = "annotation values are strings, and crictl refuses the config otherwise"
	tests := map[string][]string{
		"bad-container.json": {
			`:5: container web: cri-prober.io/liveness-probe.successThreshold: Invalid value: 2: must be 1`,
			`:6: container web: cri-prober.io/readiness-probe: Invalid value: a mapping: ` + crictlRefuses + `: write it as a JSON string: "{\"httpGet\":{\"port\":8080}}"`,
			`:7: container web: cri-prober.io/startup-probe: unknown field "periodSecond": remove it, or correct its name: did you mean "periodSeconds"?`,
			`:8: container web: cri-prober.io/livenes-probe: unknown annotation; on a container config cri-prober reads cri-prober.io/liveness-probe, cri-prober.io/readiness-probe, cri-prober.io/startup-probe, cri-prober.io/probe-extensions: did you mean "cri-prober.io/liveness-probe"?`,
			`:9: container web: cri-prober.io/restart-policy: belongs on the pod sandbox config, not on a container config`,
		},
		// The last of two restart policies is what crictl passes on: the
		// first ("Sometimes") is not checked, the duplicate is an error.
		"bad-sandbox.json": {
			`:5: pod demo/web: cri-prober.io/termination-grace-period-seconds: Invalid value: 30: ` + crictlRefuses + `: quote it: "30"`,
			`:6: pod demo/web: cri-prober.io/probe-network: Unsupported value: "inside": supported values: "node", "pod"`,
			`:7: pod demo/web: annotations[cri-prober.io/restart-policy]: duplicate key "cri-prober.io/restart-policy" (first at line 4): remove one; a decoder would silently keep only the last`,
		},
		// Inside a literal block: the field's own line.
		"bad-container.yaml": {
			`:9: container web: cri-prober.io/liveness-probe.periodSeconds: Invalid value: -1: must be greater than or equal to 0`,
		},
		// The line that lacks its comma.
		"bad-syntax.json": {
			`:5: not valid YAML or JSON: did not find expected ',' or '}': a "{" is not closed, or a comma is missing between its entries: close it or add the comma`,
		},
		// Accepted, as the agent accepts it, with a warning.
		"named-port.json": {
			`:5: container web: cri-prober.io/readiness-probe.httpGet.port: Invalid value: "http": named ports need a Pod manifest that declares them: this probe errors at every run and never changes its result; use a port number in annotations`,
		},
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata/cri", name)
			r := load(path, nil)
			var got []string
			for _, m := range messages(append(r.Errors, r.Warnings...)) {
				got = append(got, strings.TrimPrefix(m, path))
			}
			assert.Equal(t, want, got)
			assert.False(t, r.OK())
		})
	}
}

func TestSplitSource(t *testing.T) {
	for _, tt := range []struct {
		source, file string
		line         int
	}{
		{"pods.yaml:12", "pods.yaml", 12},
		{"/etc/pods/web.yaml", "/etc/pods/web.yaml", 0},
		{"<stdin>:1", "<stdin>", 1},
		{"dir/a:b.yaml:3", "dir/a:b.yaml", 3},
		{"dir/a:b.yaml", "dir/a:b.yaml", 0},
		{"annotations", "annotations", 0},
	} {
		file, line := SplitSource(tt.source)
		assert.Equal(t, tt.file, file, tt.source)
		assert.Equal(t, tt.line, line, tt.source)
	}
}
