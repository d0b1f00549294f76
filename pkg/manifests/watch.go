package manifests

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Dir keeps the pods of a manifest directory up to date: it looks
// at the files' names, sizes and modification times when inotify says the
// directory changed and every interval, and reloads when anything
// changed. The polling catches edits inotify cannot see (through links,
// bind mounts, ConfigMap-style symlink swaps).
//
// A file keeps the last version of it that loaded without errors in force
// while a newer one does not load (a file being written, a typo): its pods
// go on being probed by that version, and the new version's errors are
// reported with the file's name. Failing them closed instead would make a
// pod's readiness flap at every edit that is not atomic. Only a file that
// never loaded without errors fails its pods closed; a removed file drops
// its pods.
//
// Static pods (AsStatic) follow kubelet's file source unless KeepLastGood:
// every file whose name does not start with "." is read, and a file that
// does not load drops its pods, which are then stopped and removed (its
// errors say so).
type Dir struct {
	dir          string
	clock        clock.Clock
	static       *spec.Static // nil: the pods are others' (attach mode)
	keepLastGood bool
	changed      chan struct{}

	// One reload at a time; the fields below it are its own. Pods does not
	// take it: readers never wait for the directory to be read.
	reloadMu    sync.Mutex
	fingerprint string
	lastGood    map[string][]*spec.Pod // by path: the last version that loaded without errors

	mu      sync.Mutex
	pods    []*spec.Pod
	errs    []*spec.Error
	skipped []*spec.Notice
}

// NewDir returns a watcher of dir; call Reload or Run to read it.
func NewDir(dir string, clk clock.Clock, opts ...LoadOption) *Dir {
	if clk == nil {
		clk = clock.RealClock{}
	}
	o := loadOptionsOf(opts)
	return &Dir{dir: dir, clock: clk, static: o.static, keepLastGood: o.static == nil || o.keepLastGood,
		changed: make(chan struct{}, 1), lastGood: map[string][]*spec.Pod{}}
}

// Pods returns the pods in force and the problems found at the last reload.
func (d *Dir) Pods() ([]*spec.Pod, []*spec.Error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pods, d.errs
}

// Skipped returns what the last reload skipped, and why (not errors: a
// README, a Service); Run logs them.
func (d *Dir) Skipped() []*spec.Notice {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.skipped
}

// Changed is signalled after a reload that found something different.
func (d *Dir) Changed() <-chan struct{} { return d.changed }

// Reload reads the directory if any file changed and reports whether it
// did.
func (d *Dir) Reload() bool { return d.reload(context.Background()) }

// reload is Reload that gives up between files once ctx is done, leaving
// what is in force as it was. Nothing in it waits on anything but the file
// system (see readManifestAt), and it reads at most MaxFiles files
// of at most MaxFileSize bytes.
func (d *Dir) reload(ctx context.Context) bool {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	l, err := listDir(d.dir, d.static != nil)
	// An unreadable directory has its error as fingerprint, so that it is
	// reported once and reloaded when it becomes readable.
	fp := "error: "
	if err != nil {
		fp += err.Error()
	} else {
		defer l.close()
		fp = l.fingerprint()
	}
	if fp == d.fingerprint && d.fingerprint != "" {
		return false
	}
	r := &spec.Result{}
	lastGood := map[string][]*spec.Pod{} // files no longer listed drop out
	if err != nil {
		r.Errors = []*spec.Error{{Source: d.dir, Detail: err.Error()}}
	} else {
		files := make([]spec.File, 0, len(l.files)+1)
		files = append(files, l.report())
		for _, path := range l.files {
			if ctx.Err() != nil {
				return false // stopping; the next reload, if any, starts over
			}
			loaded, gone := loadFile(path, l.read, false, d.static)
			last, hadLast := d.lastGood[path]
			var f spec.File
			if d.keepLastGood {
				var good []*spec.Pod
				var ok bool
				f, good, ok = keepLastGood(path, loaded.Pods, loaded.Errors, gone, last, hadLast)
				if ok {
					lastGood[path] = good
				}
			} else {
				f = dropUnloaded(path, loaded, gone, last)
				if len(f.Pods) > 0 {
					lastGood[path] = f.Pods
				}
			}
			f.Skipped = loaded.Skipped // whatever is in force
			files = append(files, f)
		}
		r = spec.Combine(files...)
	}
	d.fingerprint, d.lastGood = fp, lastGood
	d.mu.Lock()
	d.pods, d.errs, d.skipped = r.Pods, r.Errors, r.Skipped
	d.mu.Unlock()
	select {
	case d.changed <- struct{}{}:
	default:
	}
	return true
}

// keepLastGood decides what a file contributes from its new version (pods,
// errs; gone: it is no longer there) and its last good version (last, if
// hadLast), and what its last good version is from now on (good, if ok).
func keepLastGood(path string, pods []*spec.Pod, errs []*spec.Error, gone bool, last []*spec.Pod, hadLast bool) (f spec.File, good []*spec.Pod, ok bool) {
	switch {
	case gone:
		// Removed: its pods go with it.
		return spec.File{Errors: errs}, nil, false
	case len(errs) == 0 && (len(pods) > 0 || len(last) == 0):
		return spec.File{Pods: pods}, pods, true
	case !hadLast:
		// Never loaded without errors: as it is, its bad pods failing
		// closed (the good ones in it are used).
		return spec.File{Pods: pods, Errors: errs}, nil, false
	case len(errs) == 0:
		// No document at all where there were pods: a file truncated to
		// be written again, most likely. Removing the file is how its
		// pods are dropped.
		return spec.File{Pods: last, Errors: []*spec.Error{{Source: path, Detail: fmt.Sprintf(
			"holds no Pod manifest (is it being written?): its last version that loaded stays in force (%s) until it holds one again; remove the file to drop its pods", podNames(last))}}}, last, true
	default:
		// The new version's errors, each as it is (a pod they name that
		// the last version has keeps that version; one it lacks fails
		// closed), then what is in force instead.
		errs = append(errs[:len(errs):len(errs)], &spec.Error{Source: path, Detail: fmt.Sprintf(
			"this version is not used: its last version that loaded without errors stays in force (%s) until the file loads without errors or is removed", podNames(last))})
		return spec.File{Pods: last, Errors: errs}, last, true
	}
}

// dropUnloaded is kubelet's file source for what a static pod file
// contributes: what its new version loads, nothing else. The pods its
// last version had and this one lacks are stopped and removed: the
// errors say so and how to keep them.
func dropUnloaded(path string, loaded spec.File, gone bool, last []*spec.Pod) spec.File {
	f := spec.File{Pods: loaded.Pods, Errors: loaded.Errors}
	if gone {
		return f
	}
	var dropped []*spec.Pod
	for _, p := range last {
		if !slices.ContainsFunc(f.Pods, func(q *spec.Pod) bool { return q.Namespace == p.Namespace && q.Name == p.Name }) {
			dropped = append(dropped, p)
		}
	}
	if len(dropped) > 0 && (len(f.Errors) > 0 || len(f.Pods) == 0) {
		verb := "are"
		if len(dropped) == 1 {
			verb = "is"
		}
		f.Errors = append(f.Errors[:len(f.Errors):len(f.Errors)], &spec.Error{Source: path, Detail: fmt.Sprintf(
			"this version does not load, so its %s %s stopped and removed, as kubelet drops the pods of a file it cannot read: fix the file (write it elsewhere and rename it into place), or run with --static-pod-keep-last-good to keep the last version that loaded",
			podNames(dropped), verb)})
	}
	return f
}

// podNames lists pods for a message, the first few of them.
func podNames(pods []*spec.Pod) string {
	const most = 5
	if len(pods) == 0 {
		return "no pods"
	}
	var names []string
	for i, p := range pods {
		if i == most {
			names = append(names, fmt.Sprintf("and %d more", len(pods)-most))
			break
		}
		names = append(names, p.Namespace+"/"+p.Name)
	}
	if len(pods) == 1 {
		return "pod " + names[0]
	}
	return "pods " + strings.Join(names, ", ")
}

// loggedSkips is how many skipped files Run names in the log.
const loggedSkips = 10

// Run reloads when the directory changes (inotify, as kubelet's file
// source watches its staticPodPath) and every interval (a change inotify
// cannot see: a file behind a link, a directory that was not there yet),
// until ctx is done. A file renamed into place is read at once; a burst of
// writes in place (a file truncated, then written) is one reload,
// settleAfterChange after the first. It logs what it
// loaded and skipped at its start (the first reload may have been done
// before) and after every reload that found a change.
func (d *Dir) Run(ctx context.Context, interval time.Duration) {
	logger := klog.FromContext(ctx).WithValues("dir", d.dir)
	changes, stop := d.watchDir(logger)
	defer stop()
	for first := true; ; first = false {
		if d.reload(ctx) || first {
			pods, errs := d.Pods()
			skipped := d.Skipped()
			logger.Info("Loaded pod manifests", "pods", len(pods), "problems", len(errs), "skipped", len(skipped))
			// A few by name: a cluttered directory must not flood the log
			// at every change (cri-prober validate lists them all).
			for _, n := range skipped[:min(len(skipped), loggedSkips)] {
				logger.Info("Skipped a file that is not a Pod manifest", "file", n.Source, "reason", n.Detail)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-d.clock.After(interval):
		case settle := <-changes:
			if settle {
				select {
				case <-ctx.Done():
					return
				case <-d.clock.After(settleAfterChange):
				}
			}
		}
	}
}

// settleAfterChange is how long a reload waits after a file was written
// in place, for the rest of the writes (a file truncated, then written).
// A file renamed into the directory or removed is read at once.
const settleAfterChange = 20 * time.Millisecond

// watchDir reports changes in the directory (true: a write in place, to
// settle; nil channel: no watch, the interval alone then); stop ends the
// watch. Files whose names start with "." are never read, so their
// changes (a manifest written beside before its rename) are not reported.
func (d *Dir) watchDir(logger klog.Logger) (changes <-chan bool, stop func()) {
	w, err := fsnotify.NewWatcher()
	if err == nil {
		err = w.Add(d.dir)
		if err != nil {
			w.Close()
		}
	}
	if err != nil {
		logger.Info("Not watching the manifest directory; changes are seen at the next look", "err", err)
		return nil, func() {}
	}
	ch := make(chan bool, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case e, ok := <-w.Events:
				if !ok {
					return
				}
				if strings.HasPrefix(filepath.Base(e.Name), ".") {
					continue
				}
				select {
				case ch <- e.Op.Has(fsnotify.Write):
				default: // one pending change is enough
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				logger.Info("Watching the manifest directory", "err", err)
			}
		}
	}()
	return ch, func() {
		w.Close()
		<-done
	}
}
