package manifests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/spec"
	"github.com/cri-prober/cri-prober/test/inputs"
)

// twoPods is a file of two pods, web's readiness period telling versions
// apart. Each version has its own length, so that a rewrite is a change
// even where file times are coarse.
func twoPods(period int) string {
	return inputs.WebPod(period) + strings.Repeat("#\n", period) + `---
apiVersion: v1
kind: Pod
metadata: {name: db, namespace: shop}
spec:
  containers:
  - name: postgres
    image: localhost/busybox:test
`
}

// podPeriods maps each pod in force to its first container's readiness
// period (0: none): which version of it is in force.
func podPeriods(pods []*spec.Pod) map[string]int32 {
	m := map[string]int32{}
	for _, p := range pods {
		var period int32
		if r := p.Containers[0].Readiness; r != nil {
			period = r.PeriodSeconds
		}
		m[p.Namespace+"/"+p.Name] = period
	}
	return m
}

// An unloadable new version of a file that loaded before keeps the last
// good version in force (the same pods, so nothing downstream sees a
// change) with the new version's errors and a note naming the file; the
// new version is used once it loads; a removed file drops its pods, and a
// file that never loaded fails its pods closed (its errors name them, and
// no manifest of theirs is in force). Fails on the old code: the bad
// version drops web and db.
func TestManifestDirKeepsLastGoodVersion(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pods.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(path, []byte(s), 0o644)) }
	d := NewDir(dir, nil)

	write(twoPods(3))
	require.True(t, d.Reload())
	good, errs := d.Pods()
	require.Empty(t, errs)
	require.Equal(t, map[string]int32{"shop/web": 3, "shop/db": 0}, podPeriods(good))

	kept := path + ": this version is not used: its last version that loaded without errors stays in force (pods shop/web, shop/db) until the file loads without errors or is removed"
	t.Run("invalid", func(t *testing.T) {
		write(strings.Replace(twoPods(5), "periodSeconds: 5", "periodSeconds: -5", 1))
		require.True(t, d.Reload())
		pods, errs := d.Pods()
		assert.Equal(t, good, pods, "the very pods of the last good version")
		assert.Equal(t, []string{
			path + ":10: pod shop/web: container app: spec.containers[0].readinessProbe.periodSeconds: Invalid value: -5: must be greater than or equal to 0",
			kept,
		}, messages(errs))
		assert.False(t, d.Reload(), "nothing changed: nothing new to report")
	})
	t.Run("not YAML", func(t *testing.T) {
		write(twoPods(7)[:60] + "\"unterminated\n")
		require.True(t, d.Reload())
		pods, errs := d.Pods()
		assert.Equal(t, good, pods)
		require.Len(t, errs, 2)
		assert.Contains(t, errs[0].Error(), path+`:3: not valid YAML or JSON: did not find expected ',' or '}': a "{" is not closed`, "the line of the unclosed {")
		assert.Equal(t, kept, errs[1].Error())
	})
	t.Run("emptied", func(t *testing.T) {
		write("# all gone?\n")
		require.True(t, d.Reload())
		pods, errs := d.Pods()
		assert.Equal(t, good, pods)
		assert.Equal(t, []string{path + ": holds no Pod manifest (is it being written?): its last version that loaded stays in force (pods shop/web, shop/db) until it holds one again; remove the file to drop its pods"},
			messages(errs))
	})
	t.Run("no longer a regular file", func(t *testing.T) {
		require.NoError(t, os.Remove(path))
		require.NoError(t, syscall.Mkfifo(path, 0o644))
		t.Cleanup(func() { os.Remove(path) })
		var reloaded bool
		inputs.Promptly(t, 8<<20, releaseFIFO(path), func() { reloaded = d.Reload() })
		require.True(t, reloaded)
		pods, errs := d.Pods()
		assert.Equal(t, good, pods)
		require.Len(t, errs, 2)
		assert.Contains(t, errs[0].Error(), path+": skipped: a named pipe (FIFO), not a regular file")
		assert.Equal(t, kept, errs[1].Error())
	})
	t.Run("fixed", func(t *testing.T) {
		write(twoPods(9))
		require.True(t, d.Reload())
		pods, errs := d.Pods()
		assert.Empty(t, errs)
		assert.Equal(t, map[string]int32{"shop/web": 9, "shop/db": 0}, podPeriods(pods))
	})
	t.Run("removed", func(t *testing.T) {
		require.NoError(t, os.Remove(path))
		require.True(t, d.Reload())
		pods, errs := d.Pods()
		assert.Empty(t, pods)
		assert.Empty(t, errs)
	})
	t.Run("never loaded", func(t *testing.T) {
		write(strings.Replace(twoPods(5), "periodSeconds: 5", "periodSeconds: -5", 1))
		require.True(t, d.Reload())
		pods, errs := d.Pods()
		assert.Equal(t, map[string]int32{"shop/db": 0}, podPeriods(pods), "web fails closed; db, valid, is used")
		require.Len(t, errs, 1)
		assert.Equal(t, "web", errs[0].Pod)
	})
}

// Static pods follow kubelet's file source: a file that no longer loads
// drops its pods (to be stopped and removed), its error says so and how to
// keep them; a file is read whatever its name's extension, as kubelet
// reads "[^.]*". KeepLastGood gives the behaviour of the pods others make.
// Compared with kubelet 1.36.3: a static pod file edited with a typo made
// kubelet kill and remove the pod ("Could not process manifest file").
func TestStaticManifestDirDropsWhatDoesNotLoad(t *testing.T) {
	staticNode := spec.Static{NodeName: "Node1", Now: func() time.Time { return time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC) }}
	dir := t.TempDir()
	path := filepath.Join(dir, "pods.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(path, []byte(s), 0o644)) }
	bad := strings.Replace(twoPods(5), "periodSeconds: 5", "periodSeconds: -5", 1)

	d := NewDir(dir, nil, AsStatic(staticNode))
	write(twoPods(3))
	require.True(t, d.Reload())
	good, errs := d.Pods()
	require.Empty(t, errs)
	require.Len(t, good, 2)

	write(bad)
	require.True(t, d.Reload())
	pods, errs := d.Pods()
	require.Len(t, pods, 1, "web is dropped, db (valid) stays")
	assert.Equal(t, "shop/db-node1", pods[0].Namespace+"/"+pods[0].Name)
	require.Len(t, errs, 2)
	assert.Contains(t, errs[0].Error(), "readinessProbe.periodSeconds: Invalid value: -5")
	assert.Equal(t, path+": this version does not load, so its pod shop/web-node1 is stopped and removed, as kubelet drops the pods of a file it cannot read: fix the file (write it elsewhere and rename it into place), or run with --static-pod-keep-last-good to keep the last version that loaded",
		errs[1].Error())

	write("# emptied\n")
	require.True(t, d.Reload())
	pods, errs = d.Pods()
	assert.Empty(t, pods)
	assert.Equal(t, []string{path + ": this version does not load, so its pod shop/db-node1 is stopped and removed, as kubelet drops the pods of a file it cannot read: fix the file (write it elsewhere and rename it into place), or run with --static-pod-keep-last-good to keep the last version that loaded"},
		messages(errs))

	noExt := filepath.Join(dir, "web")
	require.NoError(t, os.WriteFile(noExt, []byte(inputs.WebPod(4)), 0o644))
	require.True(t, d.Reload())
	pods, _ = d.Pods()
	require.Len(t, pods, 1, "a file named without an extension is read, as kubelet reads it")
	assert.Equal(t, "shop/web-node1", pods[0].Namespace+"/"+pods[0].Name)

	kept := NewDir(dir, nil, AsStatic(staticNode), KeepLastGood())
	require.NoError(t, os.Remove(noExt))
	write(twoPods(3))
	require.True(t, kept.Reload())
	write(bad)
	require.True(t, kept.Reload())
	pods, _ = kept.Pods()
	assert.Len(t, pods, 2, "KeepLastGood: the last good version stays in force")
}

// A file rewritten in place (truncated, then written) is seen by the
// watcher half-written: its pods keep their last good version all along,
// never dropped nor failed closed, and the complete version is in force
// at the end. (A prefix that is itself a valid manifest, one cut between
// documents or inside a value, cannot be told from an edit: write a
// dot-file and rename it, the one atomic way.) Fails on the old code:
// each half-written version drops web or fails it closed.
func TestManifestDirHalfWrittenFile(t *testing.T) {
	full := twoPods(7)
	for _, tt := range []struct {
		name   string
		prefix string
	}{
		{"truncated", ""},
		{"cut inside a flow sequence", full[:strings.Index(full, "/tmp/ready")+4]},
		{"cut before web's containers", full[:strings.Index(full, "  - name: app")]},
		{"cut inside db", full[:strings.Index(full, "  - name: postgres")]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "pods.yaml")
			require.NoError(t, os.WriteFile(path, []byte(twoPods(3)), 0o644))
			clk := testingclock.NewFakeClock(time.Now())
			d := NewDir(dir, clk)
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				d.Run(ctx, time.Second)
			}()
			defer func() {
				cancel()
				<-stopped
			}()
			// reloaded waits for the watcher's next reload that finds a
			// change, moving its clock on as needed.
			reloaded := func() {
				t.Helper()
				timeout := time.After(10 * time.Second)
				for {
					select {
					case <-d.Changed():
						return
					case <-timeout:
						t.Fatal("the watcher did not reload")
					case <-time.After(time.Millisecond):
						if clk.HasWaiters() {
							clk.Step(time.Second)
						}
					}
				}
			}
			reloaded()
			good, errs := d.Pods()
			require.Empty(t, errs)
			require.Equal(t, map[string]int32{"shop/web": 3, "shop/db": 0}, podPeriods(good))

			require.NoError(t, os.WriteFile(path, []byte(tt.prefix), 0o644))
			reloaded()
			pods, errs := d.Pods()
			assert.Equal(t, good, pods, "the last good version, whole")
			require.NotEmpty(t, errs, "the half-written version's problems are reported")
			for _, e := range errs {
				assert.True(t, strings.HasPrefix(e.Source, path), "names the file: %s", e)
			}
			assert.Contains(t, errs[len(errs)-1].Error(), "stays in force (pods shop/web, shop/db)")

			require.NoError(t, os.WriteFile(path, []byte(full), 0o644))
			reloaded()
			pods, errs = d.Pods()
			assert.Empty(t, errs)
			assert.Equal(t, map[string]int32{"shop/web": 7, "shop/db": 0}, podPeriods(pods), "the complete version")
		})
	}
}

// The watcher stops when its context is done, a FIFO in the directory
// notwithstanding (SIGTERM cancels the agent's context). Fails on the old
// code: the first reload never returns, so neither does Run.
func TestManifestDirRunStopsWithAFIFO(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(inputs.WebPod(3)), 0o644))
	fifo := filepath.Join(dir, "b.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	d := NewDir(dir, testingclock.NewFakeClock(time.Now()))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		d.Run(ctx, time.Second)
	}()
	select {
	case <-d.Changed():
	case <-time.After(10 * time.Second):
		releaseFIFO(fifo)()
		cancel()
		t.Fatal("the first reload did not finish")
	}
	pods, errs := d.Pods()
	assert.Len(t, pods, 1)
	assert.Equal(t, []string{fifo + ": skipped: a named pipe (FIFO), not a regular file: only regular files, directly or through a symbolic link, are read"},
		messages(errs))
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return once its context was done")
	}
}

// A change in the directory is seen at once (inotify, as kubelet's file
// source watches its staticPodPath), not at the next look: the fake clock
// is only ever stepped by the settle time, never to the hour-long
// interval. Fails on the old code: nothing reloads before the interval.
func TestManifestDirRunSeesChangesAtOnce(t *testing.T) {
	dir := t.TempDir()
	fc := testingclock.NewFakeClock(time.Now())
	d := NewDir(dir, fc)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		d.Run(ctx, time.Hour)
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	select {
	case <-d.Changed():
	case <-time.After(10 * time.Second):
		t.Fatal("the first reload did not finish")
	}
	seen := func(what string, cond func([]*spec.Pod) bool) {
		t.Helper()
		require.Eventually(t, func() bool {
			if pods, _ := d.Pods(); cond(pods) {
				return true
			}
			if fc.HasWaiters() {
				fc.Step(settleAfterChange) // a write in place settles first
			}
			return false
		}, 10*time.Second, 5*time.Millisecond, what)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".web.yaml"), []byte(inputs.WebPod(3)), 0o644))
	require.NoError(t, os.Rename(filepath.Join(dir, ".web.yaml"), filepath.Join(dir, "web.yaml")))
	seen("a manifest renamed into place", func(pods []*spec.Pod) bool { return len(pods) == 1 })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(inputs.WebPod(5)), 0o644))
	seen("a manifest written in place", func(pods []*spec.Pod) bool {
		return len(pods) == 1 && podPeriods(pods)["shop/web"] == 5
	})
}
