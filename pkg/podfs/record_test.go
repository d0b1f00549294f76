package podfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

func TestWriteRecordNewPodDir(t *testing.T) {
	m, _ := newTestManager(t)
	o := Record{Namespace: "kube-system", Name: "etcd", UID: "u1", Source: "/etc/kubernetes/manifests/etcd.yaml"}
	if err := m.WriteRecord(o); err != nil {
		t.Fatal(err)
	}
	dir := m.Layout().PodDir("u1")
	if got := mode(t, dir); got != fs.ModeDir|0o750 {
		t.Errorf("pod dir mode %v, want drwxr-x---", got)
	}
	data, err := os.ReadFile(m.Layout().RecordFile("u1"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"namespace", "name", "uid", "source", "created"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("record has no %q: %s", k, data)
		}
	}
	got, err := m.ReadRecord("u1")
	if err != nil {
		t.Fatal(err)
	}
	o.Created = testTime
	if got != o {
		t.Errorf("ReadRecord = %+v, want %+v", got, o)
	}
	// No temporary left behind.
	entries, _ := os.ReadDir(m.Layout().PodsDir())
	if len(entries) != 1 {
		t.Errorf("pods dir has %d entries, want 1", len(entries))
	}
	entries, _ = os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("pod dir has %d entries, want only the record", len(entries))
	}
}

func TestWriteRecordKeepsCreated(t *testing.T) {
	m, _ := newTestManager(t)
	first := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := m.WriteRecord(Record{Name: "a", UID: "u1", Source: "play:x.yaml", Created: first}); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteRecord(Record{Name: "a", UID: "u1", Source: "/new/path.yaml"}); err != nil {
		t.Fatal(err)
	}
	got, err := m.ReadRecord("u1")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Created.Equal(first) || got.Source != "/new/path.yaml" {
		t.Errorf("got %+v: want the first created time and the new source", got)
	}
}

func TestWriteRecordExistingDirAndLeftover(t *testing.T) {
	m, _ := newTestManager(t)
	// A half-made new pod dir left by a crash, and a pod dir made without
	// a record.
	writeFile(t, filepath.Join(m.Layout().PodsDir(), newPodPrefix+"u1", "junk"), "x")
	if err := os.MkdirAll(m.Layout().PodDir("u2"), 0o700); err != nil {
		t.Fatal(err)
	}
	recorded(t, m, "u1")
	recorded(t, m, "u2")
	if exists(filepath.Join(m.Layout().PodsDir(), newPodPrefix+"u1")) {
		t.Error("the leftover new pod dir is still there")
	}
	if got := mode(t, m.Layout().PodDir("u2")); got != fs.ModeDir|0o750 {
		t.Errorf("existing pod dir mode %v, want drwxr-x---", got)
	}
	if _, err := m.ReadRecord("u2"); err != nil {
		t.Error(err)
	}
}

func TestReadRecordErrors(t *testing.T) {
	m, _ := newTestManager(t)
	if _, err := m.ReadRecord("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing pod dir: %v, want fs.ErrNotExist", err)
	}
	if err := os.MkdirAll(m.Layout().PodDir("kubelets"), 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReadRecord("kubelets"); !errors.Is(err, ErrNoRecord) {
		t.Errorf("pod dir without record: %v, want ErrNoRecord", err)
	}
	// A record of another UID.
	writeFile(t, m.Layout().RecordFile("other"), `{"uid":"u9"}`)
	if _, err := m.ReadRecord("other"); err == nil {
		t.Error("a record of another UID was accepted")
	}
	// A pod dir that is a link: refused, not followed.
	target := t.TempDir()
	writeFile(t, filepath.Join(target, podconfig.RecordFileName), `{"uid":"link"}`)
	if err := os.Symlink(target, m.Layout().PodDir("link")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReadRecord("link"); err == nil {
		t.Error("a pod dir that is a link was followed")
	}
	if err := m.WriteRecord(Record{UID: "link"}); err == nil {
		t.Error("WriteRecord wrote through a link")
	}
	if _, err := m.ReadRecord("../x"); err == nil {
		t.Error("a UID with a slash was accepted")
	}
}

func TestPods(t *testing.T) {
	m, _ := newTestManager(t)
	if pods, err := m.Pods(); err != nil || len(pods) != 0 {
		t.Fatalf("Pods on a new root = %v, %v", pods, err)
	}
	recorded(t, m, "b")
	recorded(t, m, "a")
	if err := os.MkdirAll(m.Layout().PodDir("kubelets"), 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m.Layout().RecordFile("broken"), "{")
	writeFile(t, filepath.Join(m.Layout().PodsDir(), "afile"), "")
	if err := os.MkdirAll(filepath.Join(m.Layout().PodsDir(), newPodPrefix+"c"), 0o750); err != nil {
		t.Fatal(err)
	}
	pods, err := m.Pods()
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, p := range pods {
		uids = append(uids, p.UID)
	}
	if want := []string{"a", "b", "broken", "kubelets"}; !equalStrings(uids, want) {
		t.Fatalf("Pods = %v, want %v", uids, want)
	}
	if pods[0].Record == nil || pods[0].Record.UID != "a" || pods[1].Record == nil {
		t.Errorf("owned pods without their records: %+v", pods[:2])
	}
	if pods[2].Record != nil || pods[2].Err == nil {
		t.Errorf("broken record: %+v, want an error", pods[2])
	}
	if pods[3].Record != nil || pods[3].Err != nil {
		t.Errorf("someone else's pod: %+v, want no owner and no error", pods[3])
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Pods are made at once, not one after the other (their records' fsyncs
// no longer queue behind one lock), while Pods lists them: every record
// is there, whole, at the end. Run with -race.
func TestRecordsWrittenConcurrently(t *testing.T) {
	m, _ := newTestManager(t)
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		uid := fmt.Sprintf("u%02d", i)
		wg.Go(func() {
			if err := m.WriteRecord(Record{Namespace: "ns", Name: "web-" + uid, UID: uid, Source: "/s.yaml"}); err != nil {
				errs <- err
				return
			}
			if _, err := m.SetUp(context.Background(), testPod(uid, corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})); err != nil {
				errs <- err
			}
		})
	}
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		for range 50 {
			if _, err := m.Pods(); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	<-listed
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	dirs, err := m.Pods()
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != n {
		t.Fatalf("%d pod directories, want %d", len(dirs), n)
	}
	for _, d := range dirs {
		if d.Record == nil || d.Record.UID != d.UID {
			t.Errorf("pod %s: record %+v", d.UID, d.Record)
		}
	}
}
