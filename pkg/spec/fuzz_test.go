package spec

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// addFiles adds the files matching the patterns to the fuzzer's corpus.
func addFiles(f *testing.F, patterns ...string) {
	for _, pattern := range patterns {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, name := range files {
			data, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
}

// Any bytes in a manifest file give pods or errors that name the file and
// say what is wrong, never a panic. The bytes go through what the
// directory loader and the watcher do with a file's content once read
// (loadBytes, then keepLastGood against a last good version, then
// combine): a version that loads without errors is used, any other leaves
// the last good version in force and says so, naming the file. Reading
// itself (regular files only, MaxManifestSize) is file-system work, left
// to the unit tests: the fuzzer needs runs whose coverage depends on the
// input alone.
func FuzzLoadManifest(f *testing.F) {
	addFiles(f, "testdata/good/*", "testdata/bad/*")
	f.Add([]byte(""))
	f.Add([]byte("# nothing\n---\n"))
	f.Add([]byte("apiVersion: v1\r\nkind: Pod\r\nmetadata: {name: a}\r\nspec: {containers: [{name: b, image: c}]}\r\n---\r\n"))
	const path = "/etc/cri-prober/pods/pods.yaml"
	last, lastErrs := loadPods(path, []byte(webPod(3)))
	if len(last) != 1 || len(lastErrs) != 0 {
		f.Fatalf("the last good version does not load: %v", lastErrs)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pods, errs := loadPods(path, data)
		for _, e := range errs {
			if !strings.HasPrefix(e.Source, path) {
				t.Errorf("error without its file: %+v", e)
			}
			if e.Detail == "" {
				t.Errorf("error that says nothing: %+v", e)
			}
		}
		for _, p := range pods {
			if p == nil {
				t.Fatal("nil pod")
			}
		}

		for _, hadLast := range []bool{false, true} {
			var before []*Pod
			if hadLast {
				before = last
			}
			file, good, ok := keepLastGood(path, pods, errs, false, before, hadLast)
			combined := combine(nil, []loadedFile{file})
			inForce, reported := combined.Pods, combined.Errors
			for _, e := range reported {
				if !strings.HasPrefix(e.Source, path) || e.Detail == "" {
					t.Errorf("error that does not name the file or say what is wrong: %+v", e)
				}
			}
			loads := len(errs) == 0 && (len(pods) > 0 || !hadLast)
			switch {
			case loads:
				if !ok || len(good) != len(pods) || len(file.pods) != len(pods) || len(file.errs) != 0 {
					t.Errorf("a version that loads is not used as it is: %d pods in it, %d used, %d errors", len(pods), len(file.pods), len(file.errs))
				}
			case hadLast:
				if !ok || len(inForce) != 1 || inForce[0] != last[0] {
					t.Errorf("a version that does not load: %d pods in force, want the last good one", len(inForce))
				}
				if n := len(reported); n == 0 || !strings.Contains(reported[n-1].Detail, "stays in force (pod shop/web)") {
					t.Errorf("a version that does not load: no word of the last good one in force: %v", reported)
				}
			default:
				if ok || len(file.pods) != len(pods) || len(file.errs) != len(errs) {
					t.Errorf("a file never loaded: %d pods, %d errors, last good %v; want its own %d pods, %d errors", len(file.pods), len(file.errs), ok, len(pods), len(errs))
				}
			}
		}
	})
}

// Any bytes in a file given by name, as a crictl config is, give errors
// that name the file and say what is wrong, never a panic; a file that is
// one crictl config gives a config.
func FuzzCRIConfig(f *testing.F) {
	addFiles(f, "testdata/cri/*")
	f.Add([]byte("annotations: [a]\nmetadata: {}\n"))
	const path = "/tmp/container.json"
	f.Fuzz(func(t *testing.T, data []byte) {
		r := LoadData(path, data)
		for _, e := range r.Errors {
			if !strings.HasPrefix(e.Source, path) || e.Detail == "" {
				t.Errorf("error that does not name the file or say what is wrong: %+v", e)
			}
		}
		if docs := splitDocuments(data); len(docs) == 1 && len(data) <= MaxManifestSize {
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
