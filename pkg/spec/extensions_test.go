package spec

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/results"
)

const extensionsPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: shop
  annotations:
    cri-prober.io/probe-extensions: |
%s
spec:
  containers:
  - name: app
    image: x
    readinessProbe:
      httpGet: {port: 8080, path: /ready}
      periodSeconds: 10
    livenessProbe:
      tcpSocket: {port: 8080}
`

func loadExtensions(t *testing.T, ext string) (*Pod, []*Error) {
	t.Helper()
	var indented []string
	for _, l := range strings.Split(ext, "\n") {
		indented = append(indented, "      "+l)
	}
	pods, errs := loadPods("pods.yaml", []byte(strings.ReplaceAll(extensionsPod, "%s", strings.Join(indented, "\n"))))
	if len(pods) == 0 {
		return nil, errs
	}
	return pods[0], errs
}

func TestManifestExtensions(t *testing.T) {
	p, errs := loadExtensions(t, `app:
  readinessProbe:
    startInterval: 500ms
    httpGet: {method: HEAD, validStatusCodes: [200, 204]}`)
	require.Empty(t, errs)
	ext := p.Containers[0].Extension(results.Readiness)
	require.NotNil(t, ext)
	assert.Equal(t, 500*time.Millisecond, ext.StartInterval.Duration)
	assert.Equal(t, "HEAD", ext.HTTPGet.Method)
	assert.Equal(t, []int{200, 204}, ext.HTTPGet.ValidStatusCodes)
	assert.Nil(t, p.Containers[0].Extension(results.Liveness))

	p, errs = loadExtensions(t, `{"app": {"readinessProbe": {"httpGet": {"failIfBodyNotMatchesRegexp": "^ok"}}}}`)
	require.Empty(t, errs, "JSON is YAML too")
	assert.True(t, p.Containers[0].Extension(results.Readiness).HTTPGet.BodyRegexp().MatchString("ok!"))
}

func TestBadExtensions(t *testing.T) {
	// Line 8: the container's entry inside the annotation's "|" block.
	at := `pods.yaml:8: pod shop/web: metadata.annotations[cri-prober.io/probe-extensions]`
	for ext, want := range map[string]string{
		`db: {readinessProbe: {startInterval: 1s}}`:                                        at + `[db]: Not found: "db"`,
		`app: {startupProbe: {startInterval: 1s}}`:                                         at + `[app].startupProbe: Invalid value: "": the container has no such probe to extend`,
		`app: {readinesProbe: {}}`:                                                         at + `[app].readinesProbe: Unsupported value: "readinesProbe": supported values: "startupProbe", "readinessProbe", "livenessProbe"`,
		`app: {livenessProbe: {startInterval: 1s}}`:                                        at + `[app].livenessProbe.startInterval: Forbidden: applies while a container starts: set it on the startupProbe or the readinessProbe`,
		`app: {readinessProbe: {startInterval: 10s}}`:                                      at + `[app].readinessProbe.startInterval: Invalid value: "10s": must be shorter than periodSeconds (10s)`,
		`app: {readinessProbe: {startInterval: 1ms}}`:                                      at + `[app].readinessProbe.startInterval: Invalid value: "1ms": must be at least 100ms`,
		`app: {readinessProbe: {startInterval: soon}}`:                                     `time: invalid duration "soon"`,
		`app: {readinessProbe: {httpGet: {method: POST}}}`:                                 at + `[app].readinessProbe.httpGet.method: Unsupported value: "POST": supported values: "GET", "HEAD"`,
		`app: {readinessProbe: {httpGet: {validStatusCodes: [42]}}}`:                       at + `[app].readinessProbe.httpGet.validStatusCodes[0]: Invalid value: 42: must be an HTTP status code (100–599)`,
		`app: {readinessProbe: {httpGet: {failIfBodyNotMatchesRegexp: "("}}}`:              "error parsing regexp: missing closing )",
		`app: {readinessProbe: {httpGet: {method: HEAD, failIfBodyNotMatchesRegexp: ok}}}`: "a HEAD response has no body to match",
		`app: {livenessProbe: {httpGet: {method: HEAD}}}`:                                  at + `[app].livenessProbe.httpGet: Invalid value: "": the probe is not an httpGet probe`,
		`app: {readinessProbe: {startInterval: 1s, retries: 3}}`:                           `unknown field "readinessProbe.retries"`,
		`[not, a, map]`: "not probe extensions by container name",
	} {
		t.Run(ext, func(t *testing.T) {
			p, errs := loadExtensions(t, ext)
			assert.Nil(t, p, "a pod with an error is not used")
			require.NotEmpty(t, errs)
			assert.Contains(t, errs[0].Error(), want)
		})
	}
}

// A key given twice in the annotation is an error at its line in the
// file, as anywhere in a manifest. Fails on the old code: the last won.
func TestExtensionsDuplicateKey(t *testing.T) {
	p, errs := loadExtensions(t, `app:
  readinessProbe:
    startInterval: 1s
    startInterval: 2s`)
	assert.Nil(t, p)
	assert.Equal(t, []string{`pods.yaml:11: pod shop/web: metadata.annotations[cri-prober.io/probe-extensions].app.readinessProbe.startInterval: duplicate key "startInterval" (first at line 10): remove one; a decoder would silently keep only the last`},
		messages(errs))
}

// A body regexp is bounded: its cost grows with its size. The error names
// the field and the limit, not the (long) value.
func TestBodyRegexpSizeLimit(t *testing.T) {
	ext := func(re string) string {
		return `app: {readinessProbe: {httpGet: {failIfBodyNotMatchesRegexp: "` + re + `"}}}`
	}
	longest := strings.Repeat("a", MaxBodyRegexp)
	p, errs := loadExtensions(t, ext(longest))
	require.Empty(t, errs)
	assert.True(t, p.Containers[0].Extension(results.Readiness).HTTPGet.BodyRegexp().MatchString(longest))

	tooLong := strings.Repeat("b", MaxBodyRegexp+1)
	p, errs = loadExtensions(t, ext(tooLong))
	assert.Nil(t, p, "a pod with an error is not used")
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), `metadata.annotations[cri-prober.io/probe-extensions][app].readinessProbe.httpGet.failIfBodyNotMatchesRegexp: Too long: may not be more than 1024 bytes`)
	assert.NotContains(t, errs[0].Error(), tooLong[:100])

	_, errs = ContainerFromAnnotations("ns", "p", "app", map[string]string{
		ReadinessAnnotation:  `{"httpGet":{"port":8080}}`,
		ExtensionsAnnotation: `{"readinessProbe":{"httpGet":{"failIfBodyNotMatchesRegexp":"` + tooLong + `"}}}`,
	}, AnnotationProbeHostsPod)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "cri-prober.io/probe-extensions.readinessProbe.httpGet.failIfBodyNotMatchesRegexp: Too long: may not be more than 1024 bytes")
}

func TestAnnotationExtensions(t *testing.T) {
	probe := `{"httpGet":{"port":8080},"periodSeconds":5}`
	c, errs := ContainerFromAnnotations("ns", "p", "app", map[string]string{
		ReadinessAnnotation:  probe,
		ExtensionsAnnotation: `{"readinessProbe":{"startInterval":"1s","httpGet":{"validStatusCodes":[200]}}}`,
	}, AnnotationProbeHostsPod)
	require.Empty(t, errs)
	assert.Equal(t, time.Second, c.Extension(results.Readiness).StartInterval.Duration)

	_, errs = ContainerFromAnnotations("ns", "p", "app", map[string]string{
		ReadinessAnnotation:  probe,
		ExtensionsAnnotation: `{"readinessProbe":{"startInterval":"5s"}}`,
	}, AnnotationProbeHostsPod)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "cri-prober.io/probe-extensions.readinessProbe.startInterval: Invalid value: \"5s\": must be shorter than periodSeconds (5s)")

	_, errs = PodPolicyFromAnnotations("ns", "p", map[string]string{ExtensionsAnnotation: "{}"})
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "belongs on a container config")
}

// A container cri-prober re-created carries its bookkeeping annotations;
// they are not probe specs and not mistakes.
func TestRestartAnnotationsAreAccepted(t *testing.T) {
	c, errs := ContainerFromAnnotations("ns", "p", "app", map[string]string{
		ReadinessAnnotation:        `{"httpGet":{"port":8080}}`,
		cri.AnnotationRestartOf:    "0123",
		cri.AnnotationRestartCause: "liveness",
	}, AnnotationProbeHostsPod)
	require.Empty(t, errs)
	assert.NotNil(t, c.Readiness)
}
