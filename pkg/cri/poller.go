package cri

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// RuntimeReader is what the poller needs from the runtime.
type RuntimeReader interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
}

var _ RuntimeReader = (*Client)(nil)

const (
	// DefaultRelistPeriod is kubelet's PLEG relist period.
	DefaultRelistPeriod = time.Second
	// After a runtime event, the poller relists again quickly until the CRI
	// listing shows the change: containerd's CRI plugin updates its store
	// from the same event stream, tens of milliseconds after we see the
	// event. Retries come every 10 ms for the first 100 ms, where that lag
	// lies, then back off; after about 0.7 s the periodic relist takes over.
	expectRetryInterval  = 10 * time.Millisecond
	expectRetryFastTries = 10
	expectRetryTries     = 15
)

// Poller lists the runtime's sandboxes and containers periodically (two CRI
// list calls a relist, whatever the number of containers), asks for a
// container's status only when it is new or its state changed and for a
// sandbox's status only when it is new, publishes an immutable Snapshot and
// tells subscribers what changed.
//
// Concurrency: Relist is serialised by relistMu, which also guards pods and
// containers. snapshot is read lock-free. Subscribers have their own locks
// and are notified without blocking.
type Poller struct {
	runtime RuntimeReader
	clock   clock.WithTicker
	period  time.Duration
	metrics *Metrics

	relistMu   sync.Mutex
	pods       map[string]podEntry
	containers map[string]containerEntry

	snapshot atomic.Pointer[Snapshot]
	lastErr  atomic.Pointer[relistError]

	subsMu sync.Mutex
	subs   map[*Subscription]struct{}

	trigger chan struct{}

	expectMu     sync.Mutex
	expectations map[string]change
	retries      int // retries made for the pending expectations
}

type podEntry struct {
	pod      *Pod
	statusOK bool // the IPs came from a successful PodSandboxStatus
}

type containerEntry struct {
	container *Container
	statusOK  bool // times and exit details came from ContainerStatus for this state
}

type relistError struct {
	err error
	at  time.Time
}

// PollerOption configures NewPoller.
type PollerOption func(*Poller) error

// WithRelistPeriod sets how often the poller relists (default 1 s).
func WithRelistPeriod(d time.Duration) PollerOption {
	return func(p *Poller) error {
		if d <= 0 {
			return fmt.Errorf("relist period must be positive, got %s", d)
		}
		p.period = d
		return nil
	}
}

// WithClock replaces the real clock (tests).
func WithClock(c clock.WithTicker) PollerOption {
	return func(p *Poller) error {
		p.clock = c
		return nil
	}
}

// NewPoller returns a poller reading from runtime. Nothing is listed until
// Relist or Run is called.
func NewPoller(runtime RuntimeReader, opts ...PollerOption) (*Poller, error) {
	p := &Poller{
		runtime:      runtime,
		pods:         map[string]podEntry{},
		containers:   map[string]containerEntry{},
		subs:         map[*Subscription]struct{}{},
		trigger:      make(chan struct{}, 1),
		expectations: map[string]change{},
	}
	for _, opt := range opts {
		if err := opt(p); err != nil {
			return nil, err
		}
	}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.period == 0 {
		p.period = DefaultRelistPeriod
	}
	return p, nil
}

// Snapshot returns the last published snapshot, nil before the first
// successful relist.
func (p *Poller) Snapshot() *Snapshot { return p.snapshot.Load() }

// LastError returns when the most recent relist failed and why; a nil
// error once a relist succeeds again.
func (p *Poller) LastError() (at time.Time, err error) {
	if e := p.lastErr.Load(); e != nil {
		return e.at, e.err
	}
	return time.Time{}, nil
}

// Trigger asks Run for a relist now. It never blocks; triggers that arrive
// while one is pending are merged.
func (p *Poller) Trigger() {
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// Run relists every period and on Trigger until ctx is done.
func (p *Poller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	ticker := p.clock.NewTicker(p.period)
	defer ticker.Stop()
	var lastLogged string
	for {
		if _, err := p.Relist(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			// Damp identical errors: a runtime that is down fails every relist.
			if msg := err.Error(); msg != lastLogged {
				logger.Error(err, "Relist failed; keeping the last snapshot")
				lastLogged = msg
			}
		} else if lastLogged != "" {
			logger.Info("Relist succeeded again")
			lastLogged = ""
		}

		var retry <-chan time.Time
		if d := p.nextRetry(); d > 0 {
			retry = p.clock.After(d)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-p.trigger:
		case <-retry:
		}
	}
}

// Relist lists the runtime once, publishes the new snapshot and notifies
// subscribers of what changed since the previous one.
func (p *Poller) Relist(ctx context.Context) (*Snapshot, error) {
	p.relistMu.Lock()
	defer p.relistMu.Unlock()

	start := p.clock.Now()
	snap, err := p.relist(ctx, start)
	if p.metrics != nil {
		p.metrics.relist.Observe(p.clock.Since(start).Seconds())
	}
	if err != nil {
		p.lastErr.Store(&relistError{err: err, at: start})
		return nil, err
	}
	p.lastErr.Store(nil)
	p.publish(snap)
	p.settleExpectations(snap)
	return snap, nil
}

func (p *Poller) relist(ctx context.Context, now time.Time) (*Snapshot, error) {
	logger := klog.FromContext(ctx)
	// Containers first: a container's sandbox exists before it does, so every
	// listed container's sandbox is in the sandbox listing that follows unless
	// it was removed in between.
	listedContainers, err := p.runtime.ListContainers(ctx, nil)
	if err != nil {
		return nil, err
	}
	listedPods, err := p.runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, err
	}

	pods := make(map[string]podEntry, len(listedPods))
	for _, sb := range listedPods {
		e, ok, err := p.podEntry(ctx, sb)
		if err != nil {
			return nil, err
		}
		if ok {
			pods[sb.GetId()] = e
		}
	}

	containers := make(map[string]containerEntry, len(listedContainers))
	for _, lc := range listedContainers {
		if _, ok := pods[lc.GetPodSandboxId()]; !ok {
			logger.V(4).Info("Skipping container whose sandbox is gone", "containerID", lc.GetId(), "podSandboxID", lc.GetPodSandboxId())
			continue
		}
		e, ok, err := p.containerEntry(ctx, lc)
		if err != nil {
			return nil, err
		}
		if ok {
			containers[lc.GetId()] = e
		}
	}
	p.pods, p.containers = pods, containers

	podList := make([]*Pod, 0, len(pods))
	for _, e := range pods {
		podList = append(podList, e.pod)
	}
	containerList := make([]*Container, 0, len(containers))
	for _, e := range containers {
		containerList = append(containerList, e.container)
	}
	return NewSnapshot(now, podList, containerList), nil
}

// podEntry builds the entry for a listed sandbox, calling PodSandboxStatus
// only when the sandbox is new (or its status could not be read before).
// ok is false when the sandbox vanished meanwhile.
func (p *Poller) podEntry(ctx context.Context, sb *runtimeapi.PodSandbox) (podEntry, bool, error) {
	state := sandboxStateFromCRI(sb.GetState())
	prev, known := p.pods[sb.GetId()]
	if known && prev.statusOK {
		if prev.pod.State == state {
			return prev, true, nil
		}
		changed := *prev.pod
		changed.State = state
		return podEntry{pod: &changed, statusOK: true}, true, nil
	}

	pod := podFromList(sb)
	// Verbose, once per sandbox: the network namespace's path is only in
	// the runtime's info.
	resp, err := p.runtime.PodSandboxStatus(ctx, sb.GetId(), true)
	switch {
	case IsNotFound(err):
		return podEntry{}, false, nil
	case err != nil:
		if ctx.Err() != nil {
			return podEntry{}, false, err
		}
		// Publish what the listing says and ask again next relist.
		klog.FromContext(ctx).V(2).Info("Sandbox status failed; will retry", "podSandboxID", sb.GetId(), "err", err)
		return podEntry{pod: pod}, true, nil
	}
	applySandboxStatus(pod, resp.GetStatus())
	pod.NetNS = netNSPath(resp.GetInfo())
	return podEntry{pod: pod, statusOK: true}, true, nil
}

// containerEntry builds the entry for a listed container, calling
// ContainerStatus only when the container is new or its state changed.
func (p *Poller) containerEntry(ctx context.Context, lc *runtimeapi.Container) (containerEntry, bool, error) {
	state := containerStateFromCRI(lc.GetState())
	prev, known := p.containers[lc.GetId()]
	if known && prev.statusOK && prev.container.State == state {
		return prev, true, nil
	}

	resp, err := p.runtime.ContainerStatus(ctx, lc.GetId(), false)
	switch {
	case IsNotFound(err):
		return containerEntry{}, false, nil
	case err != nil:
		if ctx.Err() != nil {
			return containerEntry{}, false, err
		}
		klog.FromContext(ctx).V(2).Info("Container status failed; will retry", "containerID", lc.GetId(), "err", err)
		c := ContainerFromList(lc)
		if known {
			// Keep the times we knew; only the state is new.
			kept := *prev.container
			kept.State = c.State
			c = &kept
		}
		return containerEntry{container: c}, true, nil
	}
	return containerEntry{container: containerFromStatus(lc, resp.GetStatus()), statusOK: true}, true, nil
}

func podFromList(sb *runtimeapi.PodSandbox) *Pod {
	md := sb.GetMetadata()
	return &Pod{
		ID:          sb.GetId(),
		Namespace:   md.GetNamespace(),
		Name:        md.GetName(),
		UID:         md.GetUid(),
		Attempt:     md.GetAttempt(),
		State:       sandboxStateFromCRI(sb.GetState()),
		CreatedAt:   unixNano(sb.GetCreatedAt()),
		Labels:      sb.GetLabels(),
		Annotations: sb.GetAnnotations(),
	}
}

func applySandboxStatus(pod *Pod, st *runtimeapi.PodSandboxStatus) {
	if ip := st.GetNetwork().GetIp(); ip != "" {
		pod.IPs = append(pod.IPs, ip)
	}
	for _, extra := range st.GetNetwork().GetAdditionalIps() {
		pod.IPs = append(pod.IPs, extra.GetIp())
	}
	pod.HostNetwork = st.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
}

// ContainerFromList converts a listed container (no status: no start,
// finish or exit).
func ContainerFromList(lc *runtimeapi.Container) *Container {
	return &Container{
		ID:          lc.GetId(),
		SandboxID:   lc.GetPodSandboxId(),
		Name:        lc.GetMetadata().GetName(),
		Attempt:     lc.GetMetadata().GetAttempt(),
		State:       containerStateFromCRI(lc.GetState()),
		CreatedAt:   unixNano(lc.GetCreatedAt()),
		Image:       lc.GetImage().GetImage(),
		ImageRef:    lc.GetImageRef(),
		Labels:      lc.GetLabels(),
		Annotations: lc.GetAnnotations(),
	}
}

func containerFromStatus(lc *runtimeapi.Container, st *runtimeapi.ContainerStatus) *Container {
	c := ContainerFromList(lc)
	// The status is newer than the listing: its state wins.
	c.State = containerStateFromCRI(st.GetState())
	c.StartedAt = unixNano(st.GetStartedAt())
	c.FinishedAt = unixNano(st.GetFinishedAt())
	c.ExitCode = st.GetExitCode()
	c.Reason = st.GetReason()
	c.Message = st.GetMessage()
	if img := st.GetImage().GetImage(); img != "" {
		c.Image = img
	}
	if ref := st.GetImageRef(); ref != "" {
		c.ImageRef = ref
	}
	return c
}

func unixNano(ns int64) time.Time {
	if ns <= 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// change is what a runtime event announced for an object (container or
// sandbox ID), so the poller can tell whether a listing already shows it.
type change int

const (
	changeStarted change = iota
	changeExited
	changeRemoved
)

func (c change) seenIn(s *Snapshot, id string) bool {
	ctr, isContainer := s.Container(id)
	pod, isPod := s.Pod(id)
	switch c {
	case changeStarted:
		return (isContainer && ctr.State != StateCreated) || isPod
	case changeExited:
		if isContainer {
			return ctr.State == StateExited
		}
		return !isPod || pod.State == SandboxNotReady
	default:
		return !isContainer && !isPod
	}
}

// expect records that the runtime announced change for id and triggers a
// relist. Until a listing shows it, Run relists again at short, growing
// intervals, so the change is published within tens of milliseconds instead
// of at the next period.
func (p *Poller) expect(id string, c change) {
	p.expectMu.Lock()
	p.expectations[id] = c
	p.retries = 0
	p.expectMu.Unlock()
	p.Trigger()
}

func (p *Poller) settleExpectations(s *Snapshot) {
	p.expectMu.Lock()
	defer p.expectMu.Unlock()
	for id, c := range p.expectations {
		if c.seenIn(s, id) {
			delete(p.expectations, id)
		}
	}
}

// nextRetry returns how long to wait before relisting for a pending
// expectation, or 0 when there is none (or it was retried long enough: the
// periodic relist takes over).
func (p *Poller) nextRetry() time.Duration {
	p.expectMu.Lock()
	defer p.expectMu.Unlock()
	if len(p.expectations) == 0 {
		return 0
	}
	p.retries++
	switch {
	case p.retries > expectRetryTries:
		clear(p.expectations)
		p.retries = 0
		return 0
	case p.retries <= expectRetryFastTries:
		return expectRetryInterval
	default:
		return expectRetryInterval << (p.retries - expectRetryFastTries)
	}
}
