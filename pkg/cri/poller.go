package cri

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/pubsub"
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
	pods       map[string]*podEntry
	containers map[string]*containerEntry
	last       *Snapshot // the snapshot pods and containers were published in
	generation uint64    // counts relists, to find IDs listed twice

	snapshot atomic.Pointer[Snapshot]
	lastErr  atomic.Pointer[relistError]
	// lastDone is when the last relist ended, failed or not (UnixNano):
	// a watchdog's proof that the loop is alive.
	lastDone atomic.Int64
	// relists counts the relists started (Relists).
	relists atomic.Uint64

	// changes hands every relist to subscribers (changes.go).
	changes pubsub.Topic[relisted, Batch]

	trigger chan struct{}

	expectMu     sync.Mutex
	expectations map[string]change
	retries      int // retries made for the pending expectations
}

type podEntry struct {
	pod      *Sandbox
	statusOK bool   // the IPs came from a successful PodSandboxStatus
	listed   uint64 // the generation of the relist that last listed it
	placed   uint64 // the generation of the snapshot it was last put in
}

type containerEntry struct {
	container *Container
	statusOK  bool   // times and exit details came from ContainerStatus for this state
	sandboxID string // the sandbox it was listed in, which that relist listed too
	listed    uint64 // the generation of the relist that last listed it
	placed    uint64 // the generation of the snapshot it was last put in
}

type relistError struct {
	err error
	at  time.Time
}

// PollerConfig is how the runtime is listed. Zero values are the
// defaults.
type PollerConfig struct {
	// RelistPeriod is how often the runtime is listed (0 or less:
	// DefaultRelistPeriod).
	RelistPeriod time.Duration
	// Metrics are the client's series (NewMetrics), also given the
	// poller's: every relist timed (nil: none).
	Metrics *Metrics
}

// PollerOption configures NewPoller.
type PollerOption func(*Poller) error

// WithClock replaces the real clock (tests).
func WithClock(c clock.WithTicker) PollerOption {
	return func(p *Poller) error {
		p.clock = c
		return nil
	}
}

// NewPoller returns a poller reading from runtime as cfg says. Nothing is
// listed until Relist or Run is called.
func NewPoller(runtime RuntimeReader, cfg PollerConfig, opts ...PollerOption) (*Poller, error) {
	p := &Poller{
		runtime:      runtime,
		period:       cfg.RelistPeriod,
		metrics:      cfg.Metrics,
		pods:         map[string]*podEntry{},
		containers:   map[string]*containerEntry{},
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
	if p.period <= 0 {
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

// LastRelist returns when the last relist ended, whether it succeeded or
// not (zero before the first): a stuck loop shows as an old time.
func (p *Poller) LastRelist() time.Time {
	if n := p.lastDone.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Relists returns how many relists have started: a snapshot whose Seq is
// greater started after this call, so it shows whatever was done before.
func (p *Poller) Relists() uint64 { return p.relists.Load() }

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
	seq := p.relists.Add(1)
	snap, err := p.relist(ctx, start, seq)
	p.lastDone.Store(p.clock.Now().UnixNano())
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

func (p *Poller) relist(ctx context.Context, now time.Time, seq uint64) (*Snapshot, error) {
	logger := klog.FromContext(ctx)
	listedPods, listedContainers, unchanged, err := p.list(ctx)
	if err != nil {
		return nil, err
	}
	if unchanged {
		// Nothing to ask the runtime and nothing to rebuild: the new
		// snapshot shares the previous one's (immutable) contents.
		p.last = p.last.at(now, seq)
		return p.last, nil
	}

	pods := make(map[string]*podEntry, len(listedPods))
	for _, sb := range listedPods {
		e, ok, err := p.podEntry(ctx, sb)
		if err != nil {
			return nil, err
		}
		if ok {
			pods[sb.GetId()] = e
		}
	}

	containers := make(map[string]*containerEntry, len(listedContainers))
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
			if e.sandboxID != lc.GetPodSandboxId() { // a kept entry, listed elsewhere
				e = &containerEntry{container: e.container, statusOK: e.statusOK, sandboxID: lc.GetPodSandboxId()}
			}
			containers[lc.GetId()] = e
		}
	}
	p.pods, p.containers = pods, containers

	// In the previous snapshot's order, which NewSnapshot's sort then mostly
	// confirms: what an ID is sorted by (namespace, name, attempt, creation)
	// does not change.
	p.generation++
	gen := p.generation
	podList := make([]*Sandbox, 0, len(pods))
	containerList := make([]*Container, 0, len(containers))
	if p.last != nil {
		for _, old := range p.last.pods {
			if e, ok := pods[old.ID]; ok && e.placed != gen {
				e.placed = gen
				podList = append(podList, e.pod)
			}
		}
		for _, old := range p.last.containers {
			if e, ok := containers[old.ID]; ok && e.placed != gen {
				e.placed = gen
				containerList = append(containerList, e.container)
			}
		}
	}
	for _, e := range pods {
		if e.placed != gen {
			podList = append(podList, e.pod)
		}
	}
	for _, e := range containers {
		if e.placed != gen {
			containerList = append(containerList, e.container)
		}
	}
	p.last = NewSnapshot(now, podList, containerList)
	p.last.Seq = seq
	return p.last, nil
}

// list lists containers, then sandboxes. Containers first: a container's
// sandbox exists before it does, so every listed container's sandbox is in
// the sandbox listing that follows unless it was removed in between.
//
// unchanged reports that the listing shows exactly what the previous relist
// published (see beginSameAsLast); the lists are then not decoded from a
// Client (encodedLister), and nil.
func (p *Poller) list(ctx context.Context) (pods []*runtimeapi.PodSandbox, containers []*runtimeapi.Container, unchanged bool, err error) {
	enc, ok := p.runtime.(encodedLister)
	if !ok {
		if containers, err = p.runtime.ListContainers(ctx, nil); err != nil {
			return nil, nil, false, err
		}
		if pods, err = p.runtime.ListPodSandbox(ctx, nil); err != nil {
			return nil, nil, false, err
		}
		gen, same := p.beginSameAsLast()
		same = same && len(pods) == len(p.pods) && len(containers) == len(p.containers)
		for i := 0; same && i < len(pods); i++ {
			same = sameSandboxAsLast(p, gen, pods[i].GetId(), pods[i].GetState())
		}
		for i := 0; same && i < len(containers); i++ {
			c := containers[i]
			same = sameContainerAsLast(p, gen, c.GetId(), c.GetPodSandboxId(), c.GetState())
		}
		return pods, containers, same, nil
	}

	encContainers, err := enc.listContainersEncoded(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	encPods, err := enc.listPodSandboxEncoded(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	if gen, ok := p.beginSameAsLast(); ok {
		nPods, nContainers := 0, 0
		same := encPods.each(func(id []byte, state runtimeapi.PodSandboxState) bool {
			nPods++
			return sameSandboxAsLast(p, gen, id, state)
		}) && encContainers.each(func(id, sandboxID []byte, state runtimeapi.ContainerState) bool {
			nContainers++
			return sameContainerAsLast(p, gen, id, sandboxID, state)
		})
		if same && nPods == len(p.pods) && nContainers == len(p.containers) {
			return nil, nil, true, nil
		}
	}
	if containers, err = encContainers.decode(); err != nil {
		return nil, nil, false, err
	}
	if pods, err = encPods.decode(); err != nil {
		return nil, nil, false, err
	}
	return pods, containers, false, nil
}

// The steady state is a listing that shows exactly what the previous relist
// published: every listed sandbox and container is known, was read with a
// successful status and is in the same state, none is listed twice and none
// is missing. podEntry and containerEntry would then keep every entry as it
// is; the poller decides it without an allocation and keeps the previous
// snapshot's contents. The criteria are theirs: what a listing can change
// for an ID is its state (metadata, labels, annotations, image and creation
// are fixed when the object is created).

// beginSameAsLast starts a comparison with the last relist; false if there
// is none.
func (p *Poller) beginSameAsLast() (generation uint64, ok bool) {
	if p.last == nil {
		return 0, false
	}
	// Entries listed in this generation are marked, to find an ID listed
	// twice (with one missing, the counts would still match).
	p.generation++
	return p.generation, true
}

// sameSandboxAsLast reports whether a listed sandbox is known, not yet
// listed in this generation, and unchanged; and marks it listed.
func sameSandboxAsLast[S ~string | ~[]byte](p *Poller, gen uint64, id S, state runtimeapi.PodSandboxState) bool {
	e, ok := p.pods[string(id)]
	if !ok || !e.statusOK || e.listed == gen || e.pod.State != sandboxStateFromCRI(state) {
		return false
	}
	e.listed = gen
	return true
}

// sameContainerAsLast is sameSandboxAsLast for a container, which must be
// listed in the same sandbox as last time: one that relist listed. Once every
// listed sandbox was found the same, and as many as known, every known
// sandbox is listed: this is relist's check that the container's sandbox is
// in the listing.
func sameContainerAsLast[S ~string | ~[]byte](p *Poller, gen uint64, id, sandboxID S, state runtimeapi.ContainerState) bool {
	e, ok := p.containers[string(id)]
	if !ok || !e.statusOK || e.listed == gen || string(sandboxID) != e.sandboxID ||
		e.container.State != containerStateFromCRI(state) {
		return false
	}
	e.listed = gen
	return true
}

// podEntry builds the entry for a listed sandbox, calling PodSandboxStatus
// only when the sandbox is new (or its status could not be read before).
// ok is false when the sandbox vanished meanwhile.
func (p *Poller) podEntry(ctx context.Context, sb *runtimeapi.PodSandbox) (*podEntry, bool, error) {
	state := sandboxStateFromCRI(sb.GetState())
	prev, known := p.pods[sb.GetId()]
	if known && prev.statusOK {
		if prev.pod.State == state {
			return prev, true, nil
		}
		changed := *prev.pod
		changed.State = state
		return &podEntry{pod: &changed, statusOK: true}, true, nil
	}

	pod := sandboxFromList(sb)
	// Verbose, once per sandbox: the network namespace's path is only in
	// the runtime's info.
	resp, err := p.runtime.PodSandboxStatus(ctx, sb.GetId(), true)
	switch {
	case IsNotFound(err):
		return nil, false, nil
	case err != nil:
		if ctx.Err() != nil {
			return nil, false, err
		}
		// Publish what the listing says and ask again next relist.
		klog.FromContext(ctx).V(2).Info("Sandbox status failed; will retry", "podSandboxID", sb.GetId(), "err", err)
		return &podEntry{pod: pod}, true, nil
	}
	applySandboxStatus(pod, resp.GetStatus())
	pod.NetNS = netNSPath(resp.GetInfo())
	return &podEntry{pod: pod, statusOK: true}, true, nil
}

// containerEntry builds the entry for a listed container, calling
// ContainerStatus only when the container is new or its state changed.
func (p *Poller) containerEntry(ctx context.Context, lc *runtimeapi.Container) (*containerEntry, bool, error) {
	state := containerStateFromCRI(lc.GetState())
	prev, known := p.containers[lc.GetId()]
	if known && prev.statusOK && prev.container.State == state {
		return prev, true, nil
	}

	resp, err := p.runtime.ContainerStatus(ctx, lc.GetId(), false)
	switch {
	case IsNotFound(err):
		return nil, false, nil
	case err != nil:
		if ctx.Err() != nil {
			return nil, false, err
		}
		klog.FromContext(ctx).V(2).Info("Container status failed; will retry", "containerID", lc.GetId(), "err", err)
		c := ContainerFromList(lc)
		if known {
			// Keep the times we knew; only the state is new.
			kept := *prev.container
			kept.State = c.State
			c = &kept
		}
		return &containerEntry{container: c, sandboxID: lc.GetPodSandboxId()}, true, nil
	}
	return &containerEntry{container: containerFromStatus(lc, resp.GetStatus()), statusOK: true, sandboxID: lc.GetPodSandboxId()}, true, nil
}

func sandboxFromList(sb *runtimeapi.PodSandbox) *Sandbox {
	md := sb.GetMetadata()
	return &Sandbox{
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

// SandboxFromStatus converts a sandbox's status (no network namespace path:
// that is only in the verbose info).
func SandboxFromStatus(st *runtimeapi.PodSandboxStatus) *Sandbox {
	md := st.GetMetadata()
	pod := &Sandbox{
		ID:          st.GetId(),
		Namespace:   md.GetNamespace(),
		Name:        md.GetName(),
		UID:         md.GetUid(),
		Attempt:     md.GetAttempt(),
		State:       sandboxStateFromCRI(st.GetState()),
		CreatedAt:   unixNano(st.GetCreatedAt()),
		Labels:      st.GetLabels(),
		Annotations: st.GetAnnotations(),
	}
	applySandboxStatus(pod, st)
	return pod
}

func applySandboxStatus(pod *Sandbox, st *runtimeapi.PodSandboxStatus) {
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
	// An exited container's message is kubelet's: the runtime's, with its
	// termination message (read from the host, bounded: termination.go).
	c.Message = withTerminationMessage(st)
	if img := st.GetImage().GetImage(); img != "" {
		c.Image = img
	}
	if ref := st.GetImageRef(); ref != "" {
		c.ImageRef = ref
	}
	c.LogPath = st.GetLogPath()
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
	pod, isPod := s.Sandbox(id)
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
