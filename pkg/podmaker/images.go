package podmaker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/restart"
)

// ImageService is what the image puller asks of the runtime's CRI image
// service (cri.Client: the runtime's socket serves both services).
type ImageService interface {
	ImageStatus(ctx context.Context, image string, verbose bool) (*runtimeapi.ImageStatusResponse, error)
	PullImage(ctx context.Context, image string, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
}

var _ ImageService = (*cri.Client)(nil)

// Image event reasons: kubelet's (pkg/kubelet/events/event.go). A failed
// pull and a container that could not be made are both "Failed"; a pull
// held back by its back-off is ReasonBackOff.
const (
	ReasonPulling                 = "Pulling"
	ReasonPulled                  = "Pulled"
	ReasonFailedToPullImage       = "Failed"
	ReasonInspectFailed           = "InspectFailed"
	ReasonErrImageNeverPull       = "ErrImageNeverPull"
	ReasonFailedToCreateContainer = "Failed"
)

// Waiting reasons of a container whose image is not there (StartError's
// Reason): kubelet's errors (pkg/kubelet/images/types.go, cri-api's
// errors, kuberuntime's ErrCreateContainerConfig), whose text is the
// reason kubelet reports.
const (
	WaitingErrImagePull               = "ErrImagePull"
	WaitingImagePullBackOff           = "ImagePullBackOff"
	WaitingErrImageNeverPull          = "ErrImageNeverPull"
	WaitingImageInspectError          = "ImageInspectError"
	WaitingInvalidImageName           = "InvalidImageName"
	WaitingCreateContainerConfigError = "CreateContainerConfigError"
)

// imagePuller is kubelet's image manager (pkg/kubelet/images,
// imageManager) for an agent without credentials: pull policies, the
// per-pod-and-image pull back-off, serialized pulls, kubelet's events and
// waiting reasons. It is safe for concurrent use by the pod workers.
type imagePuller struct {
	images   ImageService
	clock    clock.PassiveClock
	recorder restart.Recorder
	// backoff is kubelet's imageBackOff: 10 s doubling to 300 s, keyed
	// "<pod UID>_<image as the pod asks it>" (pullImage's backOffKey).
	backoff *restart.Backoff[string]
	// slot is serializeImagePulls (kubelet's default: true): one pull at a
	// time on the node, the others wait their turn (serialImagePuller).
	slot chan struct{}

	mu sync.Mutex
	// prevErr is a back-off key's last pull error as "<reason>: <message>",
	// told while the back-off holds the next pull (prevPullErrMsg).
	prevErr map[string]string
}

// newImagePuller returns kubelet's image manager over images, timing
// pulls and back-offs with clk and telling its events to rec.
func newImagePuller(images ImageService, clk clock.PassiveClock, rec restart.Recorder) *imagePuller {
	return &imagePuller{
		images:   images,
		clock:    clk,
		recorder: rec,
		backoff:  restart.NewBackoff[string](restart.DefaultInitialBackoff, restart.DefaultMaxBackoff),
		slot:     make(chan struct{}, 1),
		prevErr:  map[string]string{},
	}
}

// ensure makes container c's image present for pod p as kubelet's
// EnsureImageExists does (pkg/kubelet/images/image_manager.go), then
// returns what kubelet's
// generateContainerConfig reads of the image: its reference (the image ID
// the runtime resolved, for the container config) and its user
// (getImageUser, for runAsNonRoot and the default user).
//
// policy is the container's imagePullPolicy (spec.ApplyAPIDefaults sets
// it): Always pulls, present or not; IfNotPresent pulls only when
// ImageStatus finds no image; Never fails with ErrImageNeverPull when it
// finds none. A pull waits for any
// other on the node, and a pod that failed to pull an image backs off from
// pulling it again (ImagePullBackOff) for 10 s, doubling to 300 s.
//
// A failure the pod's owner acts on is a *StartError with kubelet's reason
// and message (the container's waiting state), told in kubelet's events
// along with kubelet's "Error: <reason>" that startContainer adds: the
// caller records nothing more. When ctx ends, ensure returns its error,
// tells nothing and starts no back-off (the pod or the agent is stopping;
// kubelet would report its own cancelled pull as a failure).
//
// Kubelet 1.36 asks, for an image already present, whether this pod may
// use it (KubeletEnsureSecretPulledImages, beta and on since 1.35, with
// imagePullCredentialsVerificationPolicy NeverVerifyPreloadedImages: the
// pull manager's MustAttemptImagePull). An image kubelet never pulled
// (imported with ctr, pulled by hand, or by this agent) needs no check, so
// its event is the gate's "… already present on machine and can be
// accessed by the pod", never the older "… already present on machine".
func (ip *imagePuller) ensure(ctx context.Context, p *pods.Pod, c *corev1.Container, policy corev1.PullPolicy, sandboxConfig *runtimeapi.PodSandboxConfig) (podconfig.ImageInfo, error) {
	requested := c.Image
	image, err := applyDefaultImageTag(requested)
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: %v", requested, err)
		ip.eventf(p, c, events.Warning, ReasonInspectFailed, "%s", msg)
		return podconfig.ImageInfo{}, ip.failed(p, c, WaitingInvalidImageName, msg)
	}

	// imagePullPrecheck: is the image present?
	switch policy {
	case corev1.PullIfNotPresent, corev1.PullNever:
		resp, err := ip.images.ImageStatus(ctx, image, false)
		if err != nil {
			if ctx.Err() != nil {
				return podconfig.ImageInfo{}, fmt.Errorf("image status of %s: %w", image, err)
			}
			// Kubelet quotes the imageRef its GetImageRef returned with the
			// error: always "".
			msg := fmt.Sprintf("Failed to inspect image %q: %v", "", cri.Cause(err))
			ip.eventf(p, c, events.Warning, ReasonInspectFailed, "%s", msg)
			return podconfig.ImageInfo{}, ip.failed(p, c, WaitingImageInspectError, msg)
		}
		if img := resp.GetImage(); img != nil {
			ip.eventf(p, c, events.Normal, ReasonPulled, "Container image %q already present on machine and can be accessed by the pod", requested)
			return imageInfo(img.GetId(), img), nil
		}
		if policy == corev1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", requested)
			ip.eventf(p, c, events.Warning, ReasonErrImageNeverPull, "%s", msg)
			return podconfig.ImageInfo{}, ip.failed(p, c, WaitingErrImageNeverPull, msg)
		}
	}
	return ip.pull(ctx, p, c, requested, image, sandboxConfig)
}

// pull is kubelet's imageManager.pullImage: the back-off first, then the
// pull in its turn, timed from before the wait and from its start.
func (ip *imagePuller) pull(ctx context.Context, p *pods.Pod, c *corev1.Container, requested, image string, sandboxConfig *runtimeapi.PodSandboxConfig) (podconfig.ImageInfo, error) {
	key := p.UID + "_" + requested
	if ip.backoff.WaitSinceUpdate(key, ip.clock.Now()) > 0 {
		msg := fmt.Sprintf("Back-off pulling image %q", requested)
		ip.eventf(p, c, events.Normal, restart.ReasonBackOff, "%s", msg)
		// The waiting message says why the last pull failed.
		ip.mu.Lock()
		if prev, ok := ip.prevErr[key]; ok {
			msg = msg + ": " + prev
		}
		ip.mu.Unlock()
		return podconfig.ImageInfo{}, ip.failed(p, c, WaitingImagePullBackOff, msg)
	}
	ip.mu.Lock()
	delete(ip.prevErr, key)
	ip.mu.Unlock()

	start := ip.clock.Now()
	ip.eventf(p, c, events.Normal, ReasonPulling, "Pulling image %q", requested)
	res := ip.pullInTurn(ctx, image, sandboxConfig)
	if res.err != nil {
		if ctx.Err() != nil {
			return podconfig.ImageInfo{}, res.err
		}
		cause := cri.Cause(res.err)
		ip.eventf(p, c, events.Warning, ReasonFailedToPullImage, "Failed to pull image %q: %v", requested, cause)
		now := ip.clock.Now()
		ip.backoff.Next(key, now, now)
		reason, msg := evalCRIPullErr(requested, cause)
		ip.mu.Lock()
		ip.prevErr[key] = reason + ": " + msg
		ip.mu.Unlock()
		return podconfig.ImageInfo{}, ip.failed(p, c, reason, msg)
	}
	waited := ip.clock.Since(start).Truncate(time.Millisecond)
	ip.eventf(p, c, events.Normal, ReasonPulled, "Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.",
		requested, res.duration.Truncate(time.Millisecond), waited, res.image.GetSize())
	ip.backoff.GC(ip.clock.Now())
	if res.image == nil {
		// Kubelet asks for the image's user apart (getImageUser, with
		// the image as the pod names it); the status after the pull
		// answers it unless that failed.
		return ip.imageUser(ctx, p, c, res.ref)
	}
	return imageInfo(res.ref, res.image), nil
}

// pullResult is a pull's outcome: the image's reference, its status after
// the pull (nil when it could not be read) and how long the pull took,
// the status included (kubelet's pullResult).
type pullResult struct {
	ref      string
	image    *runtimeapi.Image
	duration time.Duration
	err      error
}

// pullInTurn is kubelet's serialImagePuller: it waits for the pulls ahead
// of it, then pulls and reads the image's size (best effort, as
// GetImageSize). Leaving the wait when ctx ends is kubelet's queued pull
// failing at once with its cancelled context.
func (ip *imagePuller) pullInTurn(ctx context.Context, image string, sandboxConfig *runtimeapi.PodSandboxConfig) pullResult {
	select {
	case ip.slot <- struct{}{}:
	case <-ctx.Done():
		return pullResult{err: fmt.Errorf("wait for another image pull: %w", ctx.Err())}
	}
	defer func() { <-ip.slot }()
	start := ip.clock.Now()
	ref, err := ip.images.PullImage(ctx, image, sandboxConfig)
	res := pullResult{ref: ref, err: err}
	if err == nil && ref != "" {
		if resp, err := ip.images.ImageStatus(ctx, image, false); err == nil {
			res.image = resp.GetImage()
		}
	}
	res.duration = ip.clock.Since(start)
	return res
}

// imageUser is kuberuntime's getImageUser, asked apart: a failure is
// kubelet's CreateContainerConfigError.
func (ip *imagePuller) imageUser(ctx context.Context, p *pods.Pod, c *corev1.Container, ref string) (podconfig.ImageInfo, error) {
	resp, err := ip.images.ImageStatus(ctx, c.Image, false)
	if err != nil {
		if ctx.Err() != nil {
			return podconfig.ImageInfo{}, fmt.Errorf("image status of %s: %w", c.Image, err)
		}
		msg := status.Convert(cri.Cause(err)).Message()
		ip.eventf(p, c, events.Warning, ReasonFailedToCreateContainer, "Error: %s", msg)
		return podconfig.ImageInfo{}, &restart.StartError{Reason: WaitingCreateContainerConfigError, Message: msg}
	}
	return imageInfo(ref, resp.GetImage()), nil
}

// imageInfo is the image as generateContainerConfig uses it: ref, and the
// user getImageUser reads from its status (its uid, else its username;
// neither, or no image, is root: podconfig.ImageInfo's zero user).
func imageInfo(ref string, img *runtimeapi.Image) podconfig.ImageInfo {
	info := podconfig.ImageInfo{Ref: ref}
	if uid := img.GetUid(); uid != nil {
		v := uid.GetValue()
		info.UID = &v
		return info
	}
	info.Username = img.GetUsername()
	return info
}

// failed is kuberuntime's startContainer on an EnsureImageExists error:
// its "Error: <reason>" event, and the container's waiting reason and
// message.
func (ip *imagePuller) failed(p *pods.Pod, c *corev1.Container, reason, msg string) error {
	ip.eventf(p, c, events.Warning, ReasonFailedToCreateContainer, "Error: %s", reason)
	return &restart.StartError{Reason: reason, Message: msg}
}

func (ip *imagePuller) eventf(p *pods.Pod, c *corev1.Container, eventType, reason, format string, args ...any) {
	ip.recorder.Record(events.Event{
		Time:      ip.clock.Now(),
		Type:      eventType,
		Reason:    reason,
		Namespace: p.Namespace,
		Pod:       p.Name,
		Container: c.Name,
		Message:   fmt.Sprintf(format, args...),
	})
}

// evalCRIPullErr is kubelet's: a runtime's error that starts with cri-api's
// RegistryUnavailable or SignatureValidationFailed is that reason, with
// its own message; any other is ErrImagePull with the error's text.
func evalCRIPullErr(image string, err error) (reason, msg string) {
	text := err.Error()
	switch {
	case strings.HasPrefix(text, crierrors.ErrRegistryUnavailable.Error()):
		return crierrors.ErrRegistryUnavailable.Error(), fmt.Sprintf("image pull failed for %s because the registry is unavailable%s",
			image, strings.TrimPrefix(text, crierrors.ErrRegistryUnavailable.Error()))
	case strings.HasPrefix(text, crierrors.ErrSignatureValidationFailed.Error()):
		return crierrors.ErrSignatureValidationFailed.Error(), fmt.Sprintf("image pull failed for %s because the signature validation failed%s",
			image, strings.TrimPrefix(text, crierrors.ErrSignatureValidationFailed.Error()))
	}
	return WaitingErrImagePull, text
}

// applyDefaultImageTag is kubelet's: the image as the pod names it, with
// ":latest" appended when it has neither tag nor digest ("busybox" is
// "busybox:latest", never "docker.io/library/busybox:latest": the runtime
// qualifies the name). It is what the runtime is asked for; events and
// messages quote the image as the pod names it. A name that does not
// parse is kubelet's InvalidImageName, with parsers.ParseImageName's
// error.
func applyDefaultImageTag(image string) (string, error) {
	_, tag, digest, err := parseImageName(image)
	if err != nil {
		return "", err
	}
	if digest == "" && tag != "" && !strings.HasSuffix(image, ":"+tag) {
		image = image + ":" + tag
	}
	return image, nil
}

// parseImageName is kubelet's parsers.ParseImageName: the repository,
// tag ("latest" when neither tag nor digest is given) and digest.
func parseImageName(image string) (repo, tag, digest string, err error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", "", "", fmt.Errorf("couldn't parse image name %q: %v", image, err)
	}
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	if d, ok := named.(reference.Digested); ok {
		digest = d.Digest().String()
	}
	if tag == "" && digest == "" {
		tag = "latest"
	}
	return named.Name(), tag, digest, nil
}
