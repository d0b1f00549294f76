// Package inputs is what the tests of the manifest readers and decoders
// feed them: a one-pod manifest, a fuzzer's corpus from files, and the
// bound a hostile input
// (a FIFO, /dev/zero, a YAML bomb) is held to, in time and allocations.
// It imports nothing of cri-prober's.
package inputs

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// HeapAllocs is every byte the program allocated so far.
func HeapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Promptly runs load and fails unless it returns before a deadline and
// allocates at most maxAlloc bytes meanwhile. At the deadline it calls
// release (which should unblock a load stuck on a FIFO) before failing. A
// load allocating without end is stopped by a panic well before it could
// exhaust the machine's memory: a read of /dev/zero does that in seconds.
func Promptly(t *testing.T, maxAlloc uint64, release func(), load func()) {
	t.Helper()
	const deadline = 10 * time.Second
	const runaway = 512 << 20
	before := HeapAllocs()
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
			assert.LessOrEqual(t, HeapAllocs()-before, maxAlloc, "bytes allocated while loading")
			return
		case <-tick.C:
			if used := HeapAllocs() - before; used > runaway {
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

// AddFiles adds the files matching the patterns to the fuzzer's corpus.
func AddFiles(f *testing.F, patterns ...string) {
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

// WebPod is a one-pod manifest (shop/web, a readiness probe); period tells
// versions apart.
func WebPod(period int) string {
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
