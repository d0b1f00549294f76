package logs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

// follower runs a follow in the background with a fake clock: each wait
// of the follow is reported on waits, so a test changes the file, steps
// the clock and sees what came of it, with no sleeps.
type follower struct {
	clock   *testingclock.FakeClock
	waits   chan struct{}
	out     syncBuffer
	done    chan error
	running atomic.Bool
	checks  atomic.Int32
	cancel  context.CancelFunc
}

func startFollow(t *testing.T, path string, opts Options, poll bool) *follower {
	t.Helper()
	f := &follower{clock: testingclock.NewFakeClock(time.Now()), waits: make(chan struct{}), done: make(chan error, 1)}
	f.running.Store(true)
	ctx, cancel := context.WithCancel(t.Context())
	f.cancel = cancel
	r := Reader{Clock: f.clock, poll: poll, waiting: func() {
		select {
		case f.waits <- struct{}{}:
		case <-ctx.Done():
		}
	}}
	opts.Follow = true
	go func() {
		f.done <- r.Read(ctx, path, opts, &f.out, &f.out, func(context.Context) (bool, error) {
			f.checks.Add(1)
			return f.running.Load(), nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-f.done
	})
	return f
}

// waiting returns once the follow waits again (or fails the test after
// ten seconds of real time: a follow that never waits is a bug).
func (f *follower) waiting(t *testing.T) {
	t.Helper()
	select {
	case <-f.waits:
	case err := <-f.done:
		f.done <- err
		t.Fatalf("the follow ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the follow did not wait again")
	}
}

// ended returns what the follow returned (or fails the test after ten
// seconds of real time).
func (f *follower) ended(t *testing.T) error {
	t.Helper()
	for {
		select {
		case err := <-f.done:
			f.done <- err // for the cleanup
			return err
		case <-f.waits: // waits on its way to the end
		case <-time.After(10 * time.Second):
			t.Fatal("the follow did not end")
		}
	}
}

func line(ts, stream, tag, content string) string {
	return "2024-01-02T15:04:" + ts + "Z " + stream + " " + tag + " " + content + "\n"
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// Without inotify the file is looked at every pollPeriod; a record (even
// its head) written in pieces is carried on where it stopped; whether the
// container runs is asked every checkPeriod; once it does not, what it
// wrote last is read and the follow ends.
func TestFollowPolling(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendFile(t, path, line("01", "stdout", "F", "one"))
	f := startFollow(t, path, Options{Tail: -1}, true)

	f.waiting(t)
	assert.Equal(t, "one\n", f.out.String())
	assert.EqualValues(t, 1, f.checks.Load(), "asked at the first end of the file")

	appendFile(t, path, line("02", "stderr", "F", "two"))
	f.clock.Step(pollPeriod)
	f.waiting(t)
	assert.Equal(t, "one\ntwo\n", f.out.String())

	appendFile(t, path, "2024-01-02T15:04:03Z stdout F thr")
	f.clock.Step(pollPeriod)
	f.waiting(t)
	assert.Equal(t, "one\ntwo\nthr", f.out.String(), "what there is of a record goes out at once")

	appendFile(t, path, "ee\n2024-01-02T15:0")
	f.clock.Step(pollPeriod)
	f.waiting(t)
	assert.Equal(t, "one\ntwo\nthree\n", f.out.String())
	assert.EqualValues(t, 1, f.checks.Load(), "not asked again before checkPeriod")

	appendFile(t, path, "4:04Z stdout F four\n")
	f.clock.Step(pollPeriod)
	f.waiting(t)
	assert.Equal(t, "one\ntwo\nthree\nfour\n", f.out.String(), "a head written in two pieces")
	assert.EqualValues(t, 2, f.checks.Load(), "asked again after checkPeriod")

	f.running.Store(false)
	appendFile(t, path, line("05", "stdout", "F", "last words"))
	f.clock.Step(checkPeriod)
	require.NoError(t, f.ended(t))
	assert.Equal(t, "one\ntwo\nthree\nfour\nlast words\n", f.out.String())
}

// kubelet rotates a log by renaming it (0.log.<time>, later compressed
// to .gz) and having the runtime open a new one: the follow reads the
// old file to its end, then the new one; it never reads rotated files.
func TestFollowRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	appendFile(t, filepath.Join(dir, "0.log.20240101-000000.gz"), "not read\n")
	appendFile(t, path, line("01", "stdout", "F", "one"))
	f := startFollow(t, path, Options{Tail: -1}, true)
	f.waiting(t)

	rotated := filepath.Join(dir, "0.log.20240102-150405")
	require.NoError(t, os.Rename(path, rotated))
	appendFile(t, rotated, line("02", "stdout", "P", "written before the runtime reopened, "))
	f.clock.Step(pollPeriod)
	f.waiting(t)
	assert.Equal(t, "one\nwritten before the runtime reopened, ", f.out.String(), "no file at the path for now: the old one is read")

	appendFile(t, path, line("03", "stdout", "F", "continued in the new file"))
	f.clock.Step(pollPeriod)
	f.waiting(t)
	assert.Equal(t, "one\nwritten before the runtime reopened, continued in the new file\n", f.out.String())

	appendFile(t, path, line("04", "stdout", "F", "two"))
	f.clock.Step(pollPeriod)
	f.waiting(t)
	assert.Equal(t, "one\nwritten before the runtime reopened, continued in the new file\ntwo\n", f.out.String())
	f.cancel()
	assert.ErrorIs(t, f.ended(t), context.Canceled)
}

// A file truncated under the follow is read again from its start.
func TestFollowTruncation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendFile(t, path, line("01", "stdout", "F", "one")+line("02", "stdout", "F", "two"))
	f := startFollow(t, path, Options{Tail: -1}, true)
	f.waiting(t)
	require.NoError(t, os.WriteFile(path, []byte(line("03", "stdout", "F", "three")), 0o644))
	f.clock.Step(pollPeriod)
	f.waiting(t)
	assert.Equal(t, "one\ntwo\nthree\n", f.out.String())
}

// --tail and --limit-bytes apply to a follow too; reaching the limit ends
// it without error.
func TestFollowTailAndLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendFile(t, path, line("01", "stdout", "F", "one")+line("02", "stdout", "F", "two"))
	f := startFollow(t, path, Options{Tail: 1, LimitBytes: 7}, true)
	f.waiting(t)
	assert.Equal(t, "two\n", f.out.String())
	appendFile(t, path, line("03", "stdout", "F", "three"))
	f.clock.Step(pollPeriod)
	require.NoError(t, f.ended(t))
	assert.Equal(t, "two\nthr", f.out.String())
}

// A container that no longer runs is not waited for: its log is read to
// the end and the follow returns.
func TestFollowOfAnExitedContainer(t *testing.T) {
	r := Reader{waiting: func() { t.Error("waited for an exited container") }}
	var out bytes.Buffer
	err := r.Read(t.Context(), "testdata/basic.log", Options{Tail: -1, Follow: true}, &out, &out,
		func(context.Context) (bool, error) { return false, nil })
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo\nthree\n", out.String())

	out.Reset()
	require.NoError(t, r.Read(t.Context(), "testdata/basic.log", Options{Tail: 1, Follow: true}, &out, &out, nil), "nil: not running")
	assert.Equal(t, "three\n", out.String())

	err = r.Read(t.Context(), "testdata/basic.log", Options{Tail: -1, Follow: true}, &out, &out,
		func(context.Context) (bool, error) { return false, errors.New("runtime says no") })
	assert.ErrorContains(t, err, "ask whether the container still runs: runtime says no")
}

// With inotify, a write wakes the follow at once (the fake clock never
// moves), and the runtime closing the file makes it ask whether the
// container still runs, so that an exit ends it without waiting for
// checkPeriod.
func TestFollowInotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	appendFile(t, path, line("01", "stdout", "F", "one"))
	f := startFollow(t, path, Options{Tail: -1}, false)
	f.waiting(t)

	w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = w.WriteString(line("02", "stdout", "F", "two"))
	require.NoError(t, err)
	f.waiting(t)
	assert.Equal(t, "one\ntwo\n", f.out.String())
	assert.EqualValues(t, 1, f.checks.Load())

	f.running.Store(false)
	_, err = w.WriteString(line("03", "stdout", "F", "bye"))
	require.NoError(t, err)
	require.NoError(t, w.Close()) // the container's output ended
	require.NoError(t, f.ended(t))
	assert.Equal(t, "one\ntwo\nbye\n", f.out.String())
}

// Rotation seen through inotify.
func TestFollowInotifyRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	appendFile(t, path, line("01", "stdout", "F", "one"))
	f := startFollow(t, path, Options{Tail: -1}, false)
	f.waiting(t)
	require.NoError(t, os.Rename(path, path+".20240102-150405"))
	f.waiting(t)
	appendFile(t, path, line("02", "stdout", "F", "two"))
	for f.out.String() != "one\ntwo\n" {
		f.waiting(t)
	}
}

// A follow ends when its context does, and leaves no goroutine behind
// (the inotify reader's included).
func TestFollowEndsWithTheContext(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(t.Context())
	r := Reader{waiting: cancel}
	var out bytes.Buffer
	path, err := filepath.Abs("testdata/basic.log")
	require.NoError(t, err)
	err = r.Read(ctx, path, Options{Tail: -1, Follow: true}, &out, &out, func(context.Context) (bool, error) { return true, nil })
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, "one\ntwo\nthree\n", out.String())
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines left behind")
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
