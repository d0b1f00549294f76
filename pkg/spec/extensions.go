package spec

import (
	stdjson "encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/cri-prober/cri-prober/pkg/results"
)

// ExtensionsAnnotation holds cri-prober's additions to probes, which
// core/v1 has no field for. In a manifest's metadata.annotations it maps
// container name → probe → fields; on a CRI container config, probe →
// fields:
//
//	{"app": {"readinessProbe": {"startInterval": "1s"},
//	         "livenessProbe": {"httpGet": {"method": "HEAD", "validStatusCodes": [200, 204]}}}}
const ExtensionsAnnotation = AnnotationPrefix + "probe-extensions"

// Extensions are the additions to one probe. None changes a probe that
// does not use them: the defaults are kubelet's behaviour.
type Extensions struct {
	// StartInterval runs the probe this often while the container starts
	// (a startup probe until it succeeds, a readiness probe until the
	// container is first ready), then every periodSeconds: Docker's
	// --start-interval.
	StartInterval *metav1.Duration `json:"startInterval,omitempty"`
	HTTPGet       *HTTPExtensions  `json:"httpGet,omitempty"`
}

// HTTPExtensions are blackbox_exporter's HTTP options, by its names.
type HTTPExtensions struct {
	// Method is GET (default) or HEAD.
	Method string `json:"method,omitempty"`
	// ValidStatusCodes replace kubelet's 200–399 rule when set.
	ValidStatusCodes []int `json:"validStatusCodes,omitempty"`
	// FailIfBodyNotMatchesRegexp fails a probe whose body (its first
	// 10 KiB) does not match; at most MaxBodyRegexp bytes. A match still
	// running when the probe's timeout is up fails the probe.
	FailIfBodyNotMatchesRegexp string `json:"failIfBodyNotMatchesRegexp,omitempty"`

	bodyRegexp *regexp.Regexp
}

// BodyRegexp is FailIfBodyNotMatchesRegexp compiled (nil if unset).
func (h *HTTPExtensions) BodyRegexp() *regexp.Regexp { return h.bodyRegexp }

// MaxBodyRegexp is the longest failIfBodyNotMatchesRegexp, in bytes: a
// regexp's size multiplies the cost of matching it (the prober also stops
// a match at the probe's timeout).
const MaxBodyRegexp = 1024

// minStartInterval keeps a misconfigured probe from spinning.
const minStartInterval = 100 * time.Millisecond

var probeFields = map[probeField]results.ProbeType{
	startupField: results.Startup, readinessField: results.Readiness, livenessField: results.Liveness,
}

// decodeExtensions decodes one container's extensions ({"readinessProbe":
// {...}, ...}) strictly and checks them against its probes. Field paths
// in the errors start at path.
func decodeExtensions(raw []byte, c *Container, path *field.Path) (map[results.ProbeType]*Extensions, field.ErrorList) {
	var byProbe map[string]*Extensions
	strict, err := json.UnmarshalStrict(raw, &byProbe, json.DisallowDuplicateFields, json.DisallowUnknownFields)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(path, string(raw), "not JSON probe extensions: "+cleanJSONError(err))}
	}
	var errs field.ErrorList
	for _, e := range strict {
		errs = append(errs, field.Invalid(path, "", strictDetail(e, byProbe)))
	}
	out := map[results.ProbeType]*Extensions{}
	for _, name := range sortedKeys(byProbe) {
		p := path.Child(name)
		t, ok := probeFields[probeField(name)]
		if !ok {
			errs = append(errs, field.NotSupported(p, name, []string{string(startupField), string(readinessField), string(livenessField)}))
			continue
		}
		ext := byProbe[name]
		if ext == nil {
			continue
		}
		errs = append(errs, validateExtensions(ext, c.Probe(t), t, p)...)
		out[t] = ext
	}
	return out, errs
}

func validateExtensions(ext *Extensions, probe *corev1.Probe, t results.ProbeType, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if probe == nil {
		return field.ErrorList{field.Invalid(path, "", "the container has no such probe to extend")}
	}
	if si := ext.StartInterval; si != nil {
		p := path.Child("startInterval")
		period := time.Duration(probe.PeriodSeconds) * time.Second
		switch {
		case t == results.Liveness:
			errs = append(errs, field.Forbidden(p, "applies while a container starts: set it on the startupProbe or the readinessProbe"))
		case si.Duration < minStartInterval:
			errs = append(errs, field.Invalid(p, si.Duration.String(), "must be at least 100ms"))
		case si.Duration >= period:
			errs = append(errs, field.Invalid(p, si.Duration.String(), fmt.Sprintf("must be shorter than periodSeconds (%s)", period)))
		}
	}
	if h := ext.HTTPGet; h != nil {
		p := path.Child("httpGet")
		if probe.HTTPGet == nil {
			errs = append(errs, field.Invalid(p, "", "the probe is not an httpGet probe"))
		}
		if h.Method != "" && h.Method != http.MethodGet && h.Method != http.MethodHead {
			errs = append(errs, field.NotSupported(p.Child("method"), h.Method, []string{http.MethodGet, http.MethodHead}))
		}
		for i, code := range h.ValidStatusCodes {
			if code < 100 || code > 599 {
				errs = append(errs, field.Invalid(p.Child("validStatusCodes").Index(i), code, "must be an HTTP status code (100–599)"))
			}
		}
		if h.Method == http.MethodHead && h.FailIfBodyNotMatchesRegexp != "" {
			errs = append(errs, field.Invalid(p.Child("failIfBodyNotMatchesRegexp"), h.FailIfBodyNotMatchesRegexp, "a HEAD response has no body to match"))
		}
		switch re := h.FailIfBodyNotMatchesRegexp; {
		case len(re) > MaxBodyRegexp:
			errs = append(errs, field.TooLong(p.Child("failIfBodyNotMatchesRegexp"), re, MaxBodyRegexp))
		case re != "":
			compiled, err := regexp.Compile(re)
			if err != nil {
				errs = append(errs, field.Invalid(p.Child("failIfBodyNotMatchesRegexp"), re, clip(err.Error()))) // it quotes the regexp
			}
			h.bodyRegexp = compiled
		}
	}
	return errs
}

// containerExtensions decodes a manifest's extensions annotation: container
// name → probe → fields, for the pod's probed containers.
func containerExtensions(raw string, containers []Container, path *field.Path) field.ErrorList {
	var byContainer map[string]stdjson.RawMessage
	doc, err := yaml.YAMLToJSON([]byte(raw)) // JSON is YAML too
	if err == nil {
		err = json.UnmarshalCaseSensitivePreserveInts(doc, &byContainer)
	}
	if err != nil {
		return field.ErrorList{field.Invalid(path, "", "not probe extensions by container name (JSON or YAML): "+cleanJSONError(err))}
	}
	var errs field.ErrorList
	for _, name := range sortedKeys(byContainer) {
		i := slices.IndexFunc(containers, func(c Container) bool { return c.Name == name })
		if i < 0 {
			errs = append(errs, field.NotFound(path.Key(name), name))
			continue
		}
		ext, e := decodeExtensions(byContainer[name], &containers[i], path.Key(name))
		errs = append(errs, e...)
		containers[i].Extensions = ext
	}
	return errs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
