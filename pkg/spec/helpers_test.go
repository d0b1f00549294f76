package spec

import (
	"fmt"
	"os"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// load decodes the file path as pkg/manifests' Load reads a file given by
// name (static nil: pods others made).
func load(path string, static *Static) *Result {
	data, err := os.ReadFile(path)
	if err != nil {
		return &Result{Errors: []*Error{{Source: path, Detail: "cannot read it: " + err.Error()}}}
	}
	return loadData(path, data, static)
}

// loadData decodes data as a file given by name, as pkg/manifests'
// LoadData does.
func loadData(source string, data []byte, static *Static) *Result {
	return Combine(DecodeNamedFile(source, data, static))
}

// loadPods loads data as a file of a manifest directory: its pods and
// errors.
func loadPods(path string, data []byte) ([]*Pod, []*Error) {
	f := DecodeFile(path, data, nil)
	return f.Pods, f.Errors
}

// webPod is a one-pod manifest; period tells versions apart.
func webPod(period int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  containers:
  - name: app
    image: localhost/busybox:test
    readinessProbe:
      exec: {command: ["cat", "/tmp/ready"]}
      periodSeconds: %d
`, period)
}

// heapAllocs is every byte the program allocated so far.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// promptly runs load and fails unless it returns before a deadline and
// allocates at most maxAlloc bytes meanwhile. At the deadline it calls
// release (which should unblock a load stuck on a FIFO) before failing. A
// load allocating without end is stopped by a panic well before it could
// exhaust the machine's memory.
func promptly(t *testing.T, maxAlloc uint64, release func(), load func()) {
	t.Helper()
	const deadline = 10 * time.Second
	const runaway = 512 << 20
	before := heapAllocs()
	done := make(chan struct{})
	go func() {
		defer close(done)
		load()
	}()
	timeout := time.After(deadline)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			assert.LessOrEqual(t, heapAllocs()-before, maxAlloc, "bytes allocated while loading")
			return
		case <-tick.C:
			if used := heapAllocs() - before; used > runaway {
				panic(fmt.Sprintf("the load has allocated %d MiB and goes on: a read without a limit; stopping before it exhausts memory", used>>20))
			}
		case <-timeout:
			if release != nil {
				release()
			}
			t.Fatalf("the load did not return within %v", deadline)
		}
	}
}

func messages(errs []*Error) []string {
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return msgs
}

func notices(skipped []*Notice) []string {
	var msgs []string
	for _, n := range skipped {
		msgs = append(msgs, n.String())
	}
	return msgs
}
