package spec

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cri-prober/cri-prober/test/inputs"
)

// Any bytes in a file given by name, as a crictl config is, give errors
// that name the file and say what is wrong, never a panic; a file that is
// one crictl config gives a config.
func FuzzCRIConfig(f *testing.F) {
	inputs.AddFiles(f, "testdata/cri/*")
	f.Add([]byte("annotations: [a]\nmetadata: {}\n"))
	const path = "/tmp/container.json"
	f.Fuzz(func(t *testing.T, data []byte) {
		r := loadData(path, data, nil)
		for _, e := range r.Errors {
			if !strings.HasPrefix(e.Source, path) || e.Detail == "" {
				t.Errorf("error that does not name the file or say what is wrong: %+v", e)
			}
		}
		if docs := splitDocuments(data); len(docs) == 1 {
			if root, _ := parseDocument(path, docs[0]); root != nil && classify(root, inspect(root)).class == classCRIConfig && len(r.Configs) == 0 {
				t.Error("a crictl config, and no config")
			}
		}
	})
}

// Any annotation values give a container spec or errors that say what is
// wrong, never a panic.
func FuzzAnnotations(f *testing.F) {
	f.Add(`{"httpGet":{"port":8080,"path":"/healthz"},"periodSeconds":1}`, `{"exec":{"command":["true"]}}`, `Always`)
	f.Add(`{"tcpSocket":{"port":"http"}}`, `{"grpc":{"port":9000,"service":"x"}}`, `Never`)
	f.Add(`{"periodSeconds":-1}`, `not json`, ``)
	f.Add(`{"httpGet":{"port":0,"httpHeaders":[{"name":"Authorization","value":"x"}]}}`, `{"exec":{}}`, `OnFailure`)
	f.Fuzz(func(t *testing.T, readiness, liveness, policy string) {
		annotations := map[string]string{
			ReadinessAnnotation: readiness,
			LivenessAnnotation:  liveness,
			StartupAnnotation:   readiness,
		}
		c, errs := ContainerFromAnnotations("ns", "pod", "app", annotations, AnnotationProbeHostsPod)
		for _, e := range errs {
			if e.Detail == "" || e.Pod != "pod" {
				t.Errorf("error that does not say what and where: %+v", e)
			}
		}
		if c == nil && len(errs) == 0 {
			t.Error("neither a spec nor an error")
		}
		_, perrs := PodPolicyFromAnnotations("ns", "pod", map[string]string{RestartPolicyAnnotation: policy})
		for _, e := range perrs {
			if e.Detail == "" {
				t.Errorf("error that says nothing: %+v", e)
			}
		}
	})
}

// A probe port by name resolves to a declared port of that name, else (as
// kubelet's last ditch effort) to the name read as a number; by number it
// is that number; either way only 1–65535 is accepted.
func FuzzResolvePort(f *testing.F) {
	f.Add("http", 0, int32(8080), "http")
	f.Add("", 80, int32(0), "")
	f.Add("metrics", -1, int32(70000), "metric")
	f.Add("8080", 0, int32(0), "web")
	f.Fuzz(func(t *testing.T, name string, number int, declared int32, declaredName string) {
		ports := []corev1.ContainerPort{{Name: declaredName, ContainerPort: declared}}
		inRange := func(n int) bool { return n > 0 && n < 65536 }
		if name == "" {
			got, err := ResolvePort(intstr.FromInt(number), ports)
			if (err == nil) != inRange(number) || (err == nil && got != number) {
				t.Errorf("ResolvePort(%d) = %d, %v", number, got, err)
			}
			return
		}
		got, err := ResolvePort(intstr.FromString(name), ports)
		want, parsed := int(declared), name == declaredName
		if !parsed {
			n, perr := strconv.Atoi(name)
			want, parsed = n, perr == nil
		}
		if (err == nil) != (parsed && inRange(want)) || (err == nil && got != want) {
			t.Errorf("ResolvePort(%q) with %q=%d declared = %d, %v", name, declaredName, declared, got, err)
		}
	})
}
