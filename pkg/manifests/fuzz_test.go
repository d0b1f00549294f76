package manifests

import (
	"strings"
	"testing"

	"github.com/cri-prober/cri-prober/pkg/spec"
	"github.com/cri-prober/cri-prober/test/inputs"
)

// Any bytes in a manifest file give pods or errors that name the file and
// say what is wrong, never a panic. The bytes go through what the
// directory loader and the watcher do with a file's content once read
// (spec.DecodeFile, then keepLastGood against a last good version, then
// spec.Combine): a version that loads without errors is used, any other leaves
// the last good version in force and says so, naming the file. Reading
// itself (regular files only, MaxFileSize) is file-system work, left
// to the unit tests: the fuzzer needs runs whose coverage depends on the
// input alone.
func FuzzLoadManifest(f *testing.F) {
	inputs.AddFiles(f, "../spec/testdata/good/*", "../spec/testdata/bad/*")
	f.Add([]byte(""))
	f.Add([]byte("# nothing\n---\n"))
	f.Add([]byte("apiVersion: v1\r\nkind: Pod\r\nmetadata: {name: a}\r\nspec: {containers: [{name: b, image: c}]}\r\n---\r\n"))
	const path = "/etc/cri-prober/pods/pods.yaml"
	last, lastErrs := loadPods(path, []byte(inputs.WebPod(3)))
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
			var before []*spec.Pod
			if hadLast {
				before = last
			}
			file, good, ok := keepLastGood(path, pods, errs, false, before, hadLast)
			combined := spec.Combine(file)
			inForce, reported := combined.Pods, combined.Errors
			for _, e := range reported {
				if !strings.HasPrefix(e.Source, path) || e.Detail == "" {
					t.Errorf("error that does not name the file or say what is wrong: %+v", e)
				}
			}
			loads := len(errs) == 0 && (len(pods) > 0 || !hadLast)
			switch {
			case loads:
				if !ok || len(good) != len(pods) || len(file.Pods) != len(pods) || len(file.Errors) != 0 {
					t.Errorf("a version that loads is not used as it is: %d pods in it, %d used, %d errors", len(pods), len(file.Pods), len(file.Errors))
				}
			case hadLast:
				if !ok || len(inForce) != 1 || inForce[0] != last[0] {
					t.Errorf("a version that does not load: %d pods in force, want the last good one", len(inForce))
				}
				if n := len(reported); n == 0 || !strings.Contains(reported[n-1].Detail, "stays in force (pod shop/web)") {
					t.Errorf("a version that does not load: no word of the last good one in force: %v", reported)
				}
			default:
				if ok || len(file.Pods) != len(pods) || len(file.Errors) != len(errs) {
					t.Errorf("a file never loaded: %d pods, %d errors, last good %v; want its own %d pods, %d errors", len(file.Pods), len(file.Errors), ok, len(pods), len(errs))
				}
			}
		}
	})
}
