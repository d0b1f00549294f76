package podmaker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/restart"
)

// eventLog records events and hands each to a waiting test.
type eventLog struct {
	mu   sync.Mutex
	list []events.Event
	ch   chan events.Event
}

func newEventLog() *eventLog { return &eventLog{ch: make(chan events.Event, 1024)} }

func (l *eventLog) Record(e events.Event) {
	l.mu.Lock()
	l.list = append(l.list, e)
	l.mu.Unlock()
	select {
	case l.ch <- e:
	default: // nobody waits for that many
	}
}

// take returns the events recorded since the last take, as
// "Type Reason: Message".
func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.list {
		out = append(out, e.Type+" "+e.Reason+": "+e.Message)
	}
	l.list = nil
	return out
}

// waitFor blocks until an event with message msg is recorded.
func (l *eventLog) waitFor(t *testing.T, msg string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-l.ch:
			if e.Message == msg {
				return
			}
		case <-timeout:
			t.Fatalf("no event %q", msg)
		}
	}
}

type pullTest struct {
	rt    *fakeruntime.Runtime
	clock *testingclock.FakeClock
	log   *eventLog
	ip    *imagePuller
}

// t0 is the fake clock's start.
var t0 = time.Unix(1_000_000, 0)

// pullTime is how long every pull takes on the fake clock unless a test
// sets its own pull handler.
const pullTime = 1200 * time.Millisecond

func newPullTest(t *testing.T) *pullTest {
	t.Helper()
	rt := fakeruntime.NewForTest(t)
	c, err := cri.Dial(context.Background(), rt.Endpoint())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	pt := &pullTest{rt: rt, clock: testingclock.NewFakeClock(t0), log: newEventLog()}
	pt.ip = newImagePuller(c, pt.clock, pt.log)
	rt.OnPull(func(context.Context, string) error { pt.clock.Step(pullTime); return nil })
	return pt
}

func (pt *pullTest) ensure(uid string, c *corev1.Container) (imageInfoResult, error) {
	info, err := pt.ip.ensure(context.Background(), podOf(uid), c, c.ImagePullPolicy, sandboxOf(uid))
	return imageInfoResult{info.Ref, info.UID, info.Username}, err
}

type imageInfoResult struct {
	ref      string
	uid      *int64
	username string
}

func podOf(uid string) *pods.Pod {
	return &pods.Pod{Key: uid, UID: uid, Namespace: "default", Name: "web-" + uid, Static: true}
}

func sandboxOf(uid string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web-" + uid, Namespace: "default", Uid: uid}}
}

func container(name, image string, policy corev1.PullPolicy) *corev1.Container {
	return &corev1.Container{Name: name, Image: image, ImagePullPolicy: policy}
}

func startErr(t *testing.T, err error) *restart.StartError {
	t.Helper()
	var se *restart.StartError
	require.ErrorAs(t, err, &se)
	return se
}

// unreachable is the fake's (containerd's) error for a registry that does
// not resolve.
func unreachable(ref, host, path, object string) string {
	return `failed to pull and unpack image "` + ref + `": failed to resolve reference "` + ref + `": failed to do request: Head "https://` +
		host + `/v2/` + path + `/manifests/` + object + `": dial tcp: lookup ` + host + ` on 127.0.0.53:53: no such host`
}

// Each pull policy with the image present, absent and pullable, absent
// and not pullable, present and pullable: kubelet's events, errors and
// calls.
func TestEnsureImagePolicies(t *testing.T) {
	const (
		present    = "registry.example/app:1.0" // imported: not in any registry the node reaches
		pullable   = "registry.example/app:2.0" // in the registry only
		nowhere    = "registry.invalid/app:1.0"
		republish  = "registry.example/app:3.0" // on the node and in the registry
		presentMsg = `Normal Pulled: Container image "%s" already present on machine and can be accessed by the pod`
	)
	failPresent := unreachable("registry.example/app:1.0", "registry.example", "app", "1.0")
	failNowhere := unreachable("registry.invalid/app:1.0", "registry.invalid", "app", "1.0")
	pulled := func(image string, size string) string {
		return `Normal Pulled: Successfully pulled image "` + image + `" in 1.2s (1.2s including waiting). Image size: ` + size + ` bytes.`
	}
	tests := []struct {
		policy     corev1.PullPolicy
		image      string
		wantEvents []string
		wantErr    *restart.StartError
		wantRef    string // "present", "pullable", "republish"
		wantPulls  int
	}{
		{corev1.PullAlways, present, []string{
			`Normal Pulling: Pulling image "registry.example/app:1.0"`,
			`Warning Failed: Failed to pull image "registry.example/app:1.0": ` + failPresent,
			`Warning Failed: Error: ErrImagePull`,
		}, &restart.StartError{Reason: "ErrImagePull", Message: failPresent}, "", 1},
		{corev1.PullAlways, pullable, []string{`Normal Pulling: Pulling image "registry.example/app:2.0"`, pulled(pullable, "2000000")}, nil, "pullable", 1},
		{corev1.PullAlways, nowhere, []string{
			`Normal Pulling: Pulling image "registry.invalid/app:1.0"`,
			`Warning Failed: Failed to pull image "registry.invalid/app:1.0": ` + failNowhere,
			`Warning Failed: Error: ErrImagePull`,
		}, &restart.StartError{Reason: "ErrImagePull", Message: failNowhere}, "", 1},
		{corev1.PullAlways, republish, []string{`Normal Pulling: Pulling image "registry.example/app:3.0"`, pulled(republish, "3000000")}, nil, "republish", 1},

		{corev1.PullIfNotPresent, present, []string{strings.Replace(presentMsg, "%s", present, 1)}, nil, "present", 0},
		{corev1.PullIfNotPresent, pullable, []string{`Normal Pulling: Pulling image "registry.example/app:2.0"`, pulled(pullable, "2000000")}, nil, "pullable", 1},
		{corev1.PullIfNotPresent, nowhere, []string{
			`Normal Pulling: Pulling image "registry.invalid/app:1.0"`,
			`Warning Failed: Failed to pull image "registry.invalid/app:1.0": ` + failNowhere,
			`Warning Failed: Error: ErrImagePull`,
		}, &restart.StartError{Reason: "ErrImagePull", Message: failNowhere}, "", 1},
		{corev1.PullIfNotPresent, republish, []string{strings.Replace(presentMsg, "%s", republish, 1)}, nil, "republish", 0},

		{corev1.PullNever, present, []string{strings.Replace(presentMsg, "%s", present, 1)}, nil, "present", 0},
		{corev1.PullNever, pullable, []string{
			`Warning ErrImageNeverPull: Container image "registry.example/app:2.0" is not present with pull policy of Never`,
			`Warning Failed: Error: ErrImageNeverPull`,
		}, &restart.StartError{Reason: "ErrImageNeverPull", Message: `Container image "registry.example/app:2.0" is not present with pull policy of Never`}, "", 0},
		{corev1.PullNever, nowhere, []string{
			`Warning ErrImageNeverPull: Container image "registry.invalid/app:1.0" is not present with pull policy of Never`,
			`Warning Failed: Error: ErrImageNeverPull`,
		}, &restart.StartError{Reason: "ErrImageNeverPull", Message: `Container image "registry.invalid/app:1.0" is not present with pull policy of Never`}, "", 0},
		{corev1.PullNever, republish, []string{strings.Replace(presentMsg, "%s", republish, 1)}, nil, "republish", 0},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy)+" "+tt.image, func(t *testing.T) {
			pt := newPullTest(t)
			ids := map[string]string{
				"present":   pt.rt.AddImage(present, fakeruntime.WithImageSize(1_000_000)),
				"pullable":  pt.rt.AddImage(pullable, fakeruntime.Pullable(), fakeruntime.NotPresent(), fakeruntime.WithImageSize(2_000_000)),
				"republish": pt.rt.AddImage(republish, fakeruntime.Pullable(), fakeruntime.WithImageSize(3_000_000)),
			}
			info, err := pt.ensure("u1", container("app", tt.image, tt.policy))
			assert.Equal(t, tt.wantEvents, pt.log.take())
			assert.Equal(t, tt.wantPulls, pt.rt.Calls("PullImage"))
			if tt.wantErr != nil {
				assert.Equal(t, tt.wantErr, startErr(t, err))
				assert.Empty(t, info.ref)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, ids[tt.wantRef], info.ref, "the image's ID")
			assert.True(t, pt.rt.HasImage(tt.image))
		})
	}
}

// The runtime is asked for the image with kubelet's default tag; events
// and messages name it as the pod does.
func TestEnsureAppliesTheDefaultTag(t *testing.T) {
	pt := newPullTest(t)
	id := pt.rt.AddImage("docker.io/library/busybox:latest", fakeruntime.Pullable(), fakeruntime.NotPresent())
	var asked []string
	pt.rt.OnPull(func(_ context.Context, image string) error { asked = append(asked, image); return nil })
	info, err := pt.ensure("u1", container("app", "busybox", corev1.PullIfNotPresent))
	require.NoError(t, err)
	assert.Equal(t, id, info.ref)
	assert.Equal(t, []string{"busybox:latest"}, asked)
	assert.Equal(t, []string{
		`Normal Pulling: Pulling image "busybox"`,
		`Normal Pulled: Successfully pulled image "busybox" in 0s (0s including waiting). Image size: 5242880 bytes.`,
	}, pt.log.take())
}

func TestApplyDefaultImageTag(t *testing.T) {
	const digest = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	tests := []struct{ image, want, err string }{
		{"busybox", "busybox:latest", ""},
		{"busybox:1.36", "busybox:1.36", ""},
		{"docker.io/library/busybox", "docker.io/library/busybox:latest", ""},
		{"localhost:5000/app", "localhost:5000/app:latest", ""},
		{"busybox@" + digest, "busybox@" + digest, ""},
		{"busybox:1.36@" + digest, "busybox:1.36@" + digest, ""},
		{"Registry.Example/App", "", `couldn't parse image name "Registry.Example/App": invalid reference format: repository name (App) must be lowercase`},
		{"busybox:", "", `couldn't parse image name "busybox:": invalid reference format`},
		{"", "", `couldn't parse image name "": invalid reference format`},
	}
	for _, tt := range tests {
		got, err := applyDefaultImageTag(tt.image)
		if tt.err != "" {
			assert.EqualError(t, err, tt.err, tt.image)
			continue
		}
		require.NoError(t, err, tt.image)
		assert.Equal(t, tt.want, got, tt.image)
	}
}

func TestEnsureInvalidImageName(t *testing.T) {
	pt := newPullTest(t)
	_, err := pt.ensure("u1", container("app", "Registry.Example/App", corev1.PullIfNotPresent))
	msg := `Failed to apply default image tag "Registry.Example/App": couldn't parse image name "Registry.Example/App": invalid reference format: repository name (App) must be lowercase`
	assert.Equal(t, &restart.StartError{Reason: "InvalidImageName", Message: msg}, startErr(t, err))
	assert.Equal(t, []string{"Warning InspectFailed: " + msg, "Warning Failed: Error: InvalidImageName"}, pt.log.take())
	assert.Zero(t, pt.rt.Calls("ImageStatus")+pt.rt.Calls("PullImage"))
}

// An ImageStatus that fails is kubelet's InspectFailed, quoting the
// imageRef GetImageRef returned with its error: "".
func TestEnsureInspectFailed(t *testing.T) {
	pt := newPullTest(t)
	pt.rt.SetError("ImageStatus", status.Error(codes.Unavailable, "image store is gone"))
	_, err := pt.ensure("u1", container("app", "busybox:1.36", corev1.PullIfNotPresent))
	msg := `Failed to inspect image "": rpc error: code = Unavailable desc = image store is gone`
	assert.Equal(t, &restart.StartError{Reason: "ImageInspectError", Message: msg}, startErr(t, err))
	assert.Equal(t, []string{"Warning InspectFailed: " + msg, "Warning Failed: Error: ImageInspectError"}, pt.log.take())
	assert.Zero(t, pt.rt.Calls("PullImage"))
}

// A pulled image whose status cannot be read: size 0 in the event
// (GetImageSize is best effort), then getImageUser's failure is
// kubelet's CreateContainerConfigError.
func TestEnsurePulledImageWithoutStatus(t *testing.T) {
	pt := newPullTest(t)
	pt.rt.AddImage("registry.example/app:1", fakeruntime.Pullable(), fakeruntime.NotPresent())
	pt.rt.SetError("ImageStatus", status.Error(codes.Unknown, "can not resolve image"))
	_, err := pt.ensure("u1", container("app", "registry.example/app:1", corev1.PullAlways))
	assert.Equal(t, &restart.StartError{Reason: "CreateContainerConfigError", Message: "can not resolve image"}, startErr(t, err))
	assert.Equal(t, []string{
		`Normal Pulling: Pulling image "registry.example/app:1"`,
		`Normal Pulled: Successfully pulled image "registry.example/app:1" in 1.2s (1.2s including waiting). Image size: 0 bytes.`,
		`Warning Failed: Error: can not resolve image`,
	}, pt.log.take())
}

// The image's user, as kuberuntime's getImageUser reads it from the
// runtime (containerd: the config's User, numeric before any ":group" the
// uid, else the username), whether the image was present or pulled.
func TestEnsureImageUser(t *testing.T) {
	tests := []struct {
		user     string
		uid      *int64
		username string
	}{
		{"", nil, ""}, // root: podconfig.ImageInfo's zero user
		{"1000", ptrTo(int64(1000)), ""},
		{"0", ptrTo(int64(0)), ""},
		{"nobody", nil, "nobody"},
		{"1000:1000", ptrTo(int64(1000)), ""},
		{"app:staff", nil, "app"},
	}
	for _, tt := range tests {
		for _, policy := range []corev1.PullPolicy{corev1.PullIfNotPresent, corev1.PullAlways} {
			t.Run(tt.user+" "+string(policy), func(t *testing.T) {
				pt := newPullTest(t)
				opts := []fakeruntime.ImageOption{fakeruntime.WithImageUser(tt.user)}
				if policy == corev1.PullAlways {
					opts = append(opts, fakeruntime.Pullable(), fakeruntime.NotPresent())
				}
				id := pt.rt.AddImage("registry.example/app:1", opts...)
				info, err := pt.ensure("u1", container("app", "registry.example/app:1", policy))
				require.NoError(t, err)
				assert.Equal(t, imageInfoResult{id, tt.uid, tt.username}, info)
			})
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// A failed pull backs the pod off from pulling that image: 10 s, doubling
// to 300 s, each measured from the last failed pull; while it waits,
// ImagePullBackOff with the last pull's error, and no pull.
func TestEnsurePullBackOff(t *testing.T) {
	pt := newPullTest(t)
	pt.rt.OnPull(nil) // pulls take no time: the steps below are the back-off's
	const image = "registry.invalid/app:1.0"
	c := container("app", image, corev1.PullIfNotPresent)
	cause := unreachable(image, "registry.invalid", "app", "1.0")

	_, err := pt.ensure("u1", c)
	assert.Equal(t, "ErrImagePull", startErr(t, err).Reason)
	pt.log.take()
	var delays []time.Duration
	last := pt.clock.Now()
	for range 8 {
		// Just before the back-off ends: held back, told why.
		pt.clock.Step(pt.ip.backoff.Delay("u1_"+image) - time.Millisecond)
		_, err := pt.ensure("u1", c)
		assert.Equal(t, &restart.StartError{Reason: "ImagePullBackOff", Message: `Back-off pulling image "` + image + `": ErrImagePull: ` + cause}, startErr(t, err))
		assert.Equal(t, []string{
			`Normal BackOff: Back-off pulling image "` + image + `"`,
			`Warning Failed: Error: ImagePullBackOff`,
		}, pt.log.take())
		pulls := pt.rt.Calls("PullImage")
		// Once it has: pulled again, failed again.
		pt.clock.Step(time.Millisecond)
		_, err = pt.ensure("u1", c)
		assert.Equal(t, &restart.StartError{Reason: "ErrImagePull", Message: cause}, startErr(t, err))
		assert.Equal(t, pulls+1, pt.rt.Calls("PullImage"))
		pt.log.take()
		delays = append(delays, pt.clock.Now().Sub(last))
		last = pt.clock.Now()
	}
	assert.Equal(t, []time.Duration{10, 20, 40, 80, 160, 300, 300, 300}, seconds(delays))
}

// The back-off is per pod and image (kubelet's "<pod UID>_<image>"): the
// pod's other containers with that image wait too; another pod, or
// another image, pulls at once.
func TestPullBackOffKey(t *testing.T) {
	pt := newPullTest(t)
	const image = "registry.invalid/app:1.0"
	_, err := pt.ensure("u1", container("app", image, corev1.PullAlways))
	assert.Equal(t, "ErrImagePull", startErr(t, err).Reason)
	assert.Equal(t, restart.DefaultInitialBackoff, pt.ip.backoff.Delay("u1_"+image))

	pt.clock.Step(time.Second)
	_, err = pt.ensure("u1", container("sidecar", image, corev1.PullAlways))
	assert.Equal(t, "ImagePullBackOff", startErr(t, err).Reason, "same pod, same image")
	assert.Equal(t, 1, pt.rt.Calls("PullImage"))

	_, err = pt.ensure("u2", container("app", image, corev1.PullAlways))
	assert.Equal(t, "ErrImagePull", startErr(t, err).Reason, "another pod pulls")
	assert.Equal(t, 2, pt.rt.Calls("PullImage"))

	_, err = pt.ensure("u1", container("app", "registry.invalid/other:1.0", corev1.PullAlways))
	assert.Equal(t, "ErrImagePull", startErr(t, err).Reason, "another image pulls")
	assert.Equal(t, 3, pt.rt.Calls("PullImage"))

	_, err = pt.ensure("u1", container("app", "registry.invalid/app:1.0@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", corev1.PullAlways))
	assert.Equal(t, "ErrImagePull", startErr(t, err).Reason, "the image as the pod names it is the key")
	assert.Equal(t, 4, pt.rt.Calls("PullImage"))
}

// A present image under IfNotPresent is never held back by a pull
// back-off: the back-off is only looked at when a pull is due.
func TestPullBackOffOnlyHoldsPulls(t *testing.T) {
	pt := newPullTest(t)
	const image = "registry.example/app:1"
	_, err := pt.ensure("u1", container("app", image, corev1.PullIfNotPresent))
	assert.Equal(t, "ErrImagePull", startErr(t, err).Reason)
	id := pt.rt.AddImage(image) // imported meanwhile
	info, err := pt.ensure("u1", container("app", image, corev1.PullIfNotPresent))
	require.NoError(t, err)
	assert.Equal(t, id, info.ref)
}

// A successful pull collects the back-off entries that expired (2×300 s
// without an update), as kubelet's backOff.GC; the others stay.
func TestPullBackOffGC(t *testing.T) {
	pt := newPullTest(t)
	pt.rt.OnPull(nil)
	pt.rt.AddImage("registry.example/ok:1", fakeruntime.Pullable(), fakeruntime.NotPresent())
	_, err := pt.ensure("u1", container("app", "registry.invalid/app:1", corev1.PullAlways))
	require.Error(t, err)
	pt.clock.Step(300 * time.Second)
	_, err = pt.ensure("u2", container("app", "registry.invalid/app:1", corev1.PullAlways))
	require.Error(t, err)
	pt.clock.Step(300*time.Second + time.Millisecond)

	_, err = pt.ensure("u3", container("app", "registry.example/ok:1", corev1.PullAlways))
	require.NoError(t, err)
	assert.Zero(t, pt.ip.backoff.Delay("u1_registry.invalid/app:1"), "expired: collected")
	assert.Equal(t, restart.DefaultInitialBackoff, pt.ip.backoff.Delay("u2_registry.invalid/app:1"), "not expired: kept")
}

// One pull at a time on the node (serializeImagePulls): a second pull
// waits for the first, and its "including waiting" time says so.
func TestPullsAreSerialized(t *testing.T) {
	pt := newPullTest(t)
	pt.rt.AddImage("registry.example/a:1", fakeruntime.Pullable(), fakeruntime.NotPresent())
	pt.rt.AddImage("registry.example/b:1", fakeruntime.Pullable(), fakeruntime.NotPresent())
	var inFlight, most atomic.Int32
	entered := make(chan string)
	release := map[string]chan struct{}{"registry.example/a:1": make(chan struct{}), "registry.example/b:1": make(chan struct{})}
	pt.rt.OnPull(func(ctx context.Context, image string) error {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		if n > most.Load() {
			most.Store(n)
		}
		entered <- image
		<-release[image]
		return nil
	})

	errA, errB := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := pt.ensure("u1", container("app", "registry.example/a:1", corev1.PullAlways))
		errA <- err
	}()
	assert.Equal(t, "registry.example/a:1", <-entered)
	go func() {
		_, err := pt.ensure("u2", container("app", "registry.example/b:1", corev1.PullAlways))
		errB <- err
	}()
	pt.log.waitFor(t, `Pulling image "registry.example/b:1"`) // it waits its turn from here
	assert.Equal(t, 1, pt.rt.Calls("PullImage"), "b waits for a")

	pt.clock.Step(3 * time.Second)
	close(release["registry.example/a:1"])
	assert.Equal(t, "registry.example/b:1", <-entered)
	require.NoError(t, <-errA)
	pt.clock.Step(time.Second)
	close(release["registry.example/b:1"])
	require.NoError(t, <-errB)
	assert.Equal(t, int32(1), most.Load())
	assert.Equal(t, []string{
		`Normal Pulling: Pulling image "registry.example/a:1"`,
		`Normal Pulling: Pulling image "registry.example/b:1"`,
		`Normal Pulled: Successfully pulled image "registry.example/a:1" in 3s (3s including waiting). Image size: 5242880 bytes.`,
		`Normal Pulled: Successfully pulled image "registry.example/b:1" in 1s (4s including waiting). Image size: 5242880 bytes.`,
	}, pt.log.take())
}

// A pull cut short by its context (the pod or the agent stopping) tells
// nothing and starts no back-off; so does a wait for another pull.
func TestPullCancelled(t *testing.T) {
	pt := newPullTest(t)
	pt.rt.AddImage("registry.example/a:1", fakeruntime.Pullable(), fakeruntime.NotPresent())
	entered := make(chan struct{}, 1)
	pt.rt.OnPull(func(ctx context.Context, image string) error {
		entered <- struct{}{}
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	})
	c := container("app", "registry.example/a:1", corev1.PullAlways)

	ctx1, cancel1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() {
		_, err := pt.ip.ensure(ctx1, podOf("u1"), c, c.ImagePullPolicy, sandboxOf("u1"))
		done1 <- err
	}()
	<-entered
	// A second pull waits its turn, and is cancelled while it waits.
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() {
		_, err := pt.ip.ensure(ctx2, podOf("u2"), c, c.ImagePullPolicy, sandboxOf("u2"))
		done2 <- err
	}()
	pt.log.waitFor(t, `Pulling image "registry.example/a:1"`)
	pt.log.waitFor(t, `Pulling image "registry.example/a:1"`)
	cancel2()
	err2 := <-done2
	assert.ErrorIs(t, err2, context.Canceled)
	var se *restart.StartError
	assert.False(t, errors.As(err2, &se))
	cancel1()
	err1 := <-done1
	assert.Equal(t, codes.Canceled, status.Code(err1))
	assert.False(t, errors.As(err1, &se))

	assert.Equal(t, []string{`Normal Pulling: Pulling image "registry.example/a:1"`, `Normal Pulling: Pulling image "registry.example/a:1"`}, pt.log.take(),
		"no Failed, no Error")
	assert.Equal(t, 1, pt.rt.Calls("PullImage"), "the waiting one never pulled")
	assert.Zero(t, pt.ip.backoff.Delay("u1_registry.example/a:1"))
	assert.Zero(t, pt.ip.backoff.Delay("u2_registry.example/a:1"))
}

// A runtime's RegistryUnavailable and SignatureValidationFailed are their
// own reasons with kubelet's messages (evalCRIPullErr).
func TestEvalCRIPullErr(t *testing.T) {
	tests := []struct{ err, reason, msg string }{
		{"RegistryUnavailable: dial tcp 10.0.0.1:443: connect: connection refused", "RegistryUnavailable",
			"image pull failed for app:1 because the registry is unavailable: dial tcp 10.0.0.1:443: connect: connection refused"},
		{"SignatureValidationFailed: no signature", "SignatureValidationFailed",
			"image pull failed for app:1 because the signature validation failed: no signature"},
		{"failed to pull and unpack image", "ErrImagePull", "failed to pull and unpack image"},
	}
	for _, tt := range tests {
		reason, msg := evalCRIPullErr("app:1", errors.New(tt.err))
		assert.Equal(t, tt.reason, reason)
		assert.Equal(t, tt.msg, msg)
	}

	pt := newPullTest(t)
	pt.rt.OnPull(func(context.Context, string) error {
		return status.Error(codes.Unknown, "RegistryUnavailable: registry.example is down")
	})
	_, err := pt.ensure("u1", container("app", "registry.example/app:1", corev1.PullAlways))
	assert.Equal(t, &restart.StartError{Reason: "RegistryUnavailable", Message: "image pull failed for registry.example/app:1 because the registry is unavailable: registry.example is down"}, startErr(t, err))
	pt.clock.Step(time.Second)
	_, err = pt.ensure("u1", container("app", "registry.example/app:1", corev1.PullAlways))
	assert.Equal(t, `Back-off pulling image "registry.example/app:1": RegistryUnavailable: image pull failed for registry.example/app:1 because the registry is unavailable: registry.example is down`,
		startErr(t, err).Message)
}

// seconds is ds in whole seconds.
func seconds(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / time.Second
	}
	return out
}
