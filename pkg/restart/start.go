package restart

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// Maker makes what a static pod needs from its spec: its host side and
// the CRI configs of its sandbox and containers. It is what pod sync asks
// of pkg/podmaker (which joins pkg/podconfig, pkg/podfs and the image
// service), declared here so that pod sync imports none of them; pkg/agent
// wires one in (WithMaker).
type Maker interface {
	// Sandbox prepares the pod's host side (its directory, volumes and
	// log directory) and returns the config of its sandbox of attempt.
	Sandbox(ctx context.Context, p *pods.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error)
	// Container makes the container's image present (pulling it as its
	// policy says) and returns the config of its instance of attempt
	// (-1: the maker finds it, as kubelet does, from the log directory)
	// in sandbox. A failure a user can act on is a *StartError.
	Container(ctx context.Context, p *pods.Pod, sandbox *cri.Sandbox, c *pods.Container, attempt int64) (*runtimeapi.ContainerConfig, *runtimeapi.PodSandboxConfig, error)
	// TearDown removes what the pod left on the host once its sandboxes
	// are gone: its directory, volumes, logs and records.
	TearDown(ctx context.Context, p *pods.Pod) error
}

// ContainerLogs is what pod sync asks of the node's container log files
// (pkg/logs; pkg/agent wires one in, WithContainerLogs): kubelet's legacy
// link (/var/log/containers) made once an instance started, and an
// instance's files (its log, its rotated files, its link) removed once the
// runtime removed it (kubelet's removeContainerLog). Both act on
// inst.LogPath; their errors are logged, never the container's failure.
type ContainerLogs interface {
	Link(namespace, podName string, inst *cri.Container) error
	Remove(namespace, podName string, inst *cri.Container) error
}

// WithContainerLogs links and removes the log files of the instances pod
// sync starts and removes (nil: neither).
func WithContainerLogs(l ContainerLogs) Option {
	return func(r *Restarter) error { r.logs = l; return nil }
}

// StartError is why a container could not be made, as kubelet reports it
// in the container's waiting reason: ErrImagePull, ImagePullBackOff,
// ErrImageNeverPull, CreateContainerConfigError, …
type StartError struct {
	Reason  string
	Message string
}

func (e *StartError) Error() string { return e.Reason + ": " + e.Message }

// ErrNoMaker is returned for a static pod when the restarter makes none.
var ErrNoMaker = errors.New("this agent does not make pods (no static pod path)")

// WithMaker makes static pods with m.
func WithMaker(m Maker) Option { return func(r *Restarter) error { r.maker = m; return nil } }

// startContainer starts one container as kubelet's startContainer does:
// a new instance created (a static pod's from its spec, another's from its
// last instance's CRI config) unless an interrupted one is resumed, then
// started, then its postStart hook run before it is probed or reported.
// A failed hook kills it (with the pod's grace period); its exit is then
// restarted with back-off.
func (r *Restarter) startContainer(ctx context.Context, w *podWorker, p *pods.Pod, sandbox *cri.Sandbox, s startAction) error {
	c := s.container
	key := containerKey{p.Key, c.Name}
	now := r.clock.Now()
	entry, pending := ledger.Entry{}, false
	if s.replaces != nil {
		entry, pending = w.state.pending[s.replaces.ID]
		if !pending {
			entry = r.entry(ctx, p, s.replaces, s.cause)
		}
	}
	inst := s.resume
	if inst == nil {
		if !s.backoffFrom.IsZero() {
			r.backoff.Next(key, s.backoffFrom, now)
		}
		cfg, sandboxCfg, err := r.containerConfig(ctx, p, sandbox, s)
		if err != nil {
			r.startFailed(ctx, w, p, c, err)
			return err
		}
		id, err := r.runtime.CreateContainer(ctx, sandbox.ID, cfg, sandboxCfg)
		if err != nil {
			r.eventf(p, c.Name, events.Warning, "Failed", "Error: %v", err)
			w.state.failed[c.Name] = pods.Waiting{Reason: "CreateContainerError", Message: err.Error()}
			return fmt.Errorf("create container %s: %w", c.Name, err)
		}
		r.eventf(p, c.Name, events.Normal, ReasonCreated, "Container created") // kubelet 1.36's text
		inst = &cri.Container{ID: id, SandboxID: sandbox.ID, Name: c.Name, Attempt: cfg.GetMetadata().GetAttempt(), State: cri.StateCreated, CreatedAt: now,
			LogPath: logPath(sandboxCfg, cfg)}
	}
	if err := r.runtime.StartContainer(ctx, inst.ID); err != nil {
		r.eventf(p, c.Name, events.Warning, "Failed", "Error: %v", err)
		w.state.failed[c.Name] = pods.Waiting{Reason: "RunContainerError", Message: err.Error()}
		return fmt.Errorf("start container %s: %w", c.Name, err)
	}
	delete(w.state.failed, c.Name)
	r.link(ctx, sandbox, inst)
	transition := events.Transition("")
	if s.replaces != nil || s.resume != nil {
		transition = events.TransitionRestarted
		r.metrics.restarted(p, c.Name, s.cause)
	}
	r.recorder.Record(events.Event{Time: r.clock.Now(), Type: events.Normal, Reason: ReasonStarted, Transition: transition,
		Namespace: p.Namespace, Pod: p.Name, Container: c.Name, Message: "Container started"})
	if !r.postStart(ctx, w, p, c, inst) {
		return errors.New("postStart hook failed")
	}
	if s.replaces != nil {
		delete(w.state.pending, s.replaces.ID)
		entry.Action, entry.ReplacementID, entry.Attempt, entry.Time = ledger.ActionRestarted, inst.ID, inst.Attempt, r.clock.Now()
		if !s.backoffFrom.IsZero() {
			entry.BackOffSeconds = now.Sub(s.backoffFrom).Seconds()
		}
		r.record(ctx, entry)
	} else if s.resume != nil {
		// The agent that decided this restart is gone, and the failures it
		// saw with it; the cause and the old instance's exit are on record.
		if old := replacedBy(c, s.resume); old != nil {
			e := r.entry(ctx, p, old, s.cause)
			e.Action, e.ReplacementID, e.Attempt = ledger.ActionRestarted, s.resume.ID, s.resume.Attempt
			r.record(ctx, e)
		}
	}
	return nil
}

// logPath is a new instance's log file, as the runtime reports it: the
// sandbox's log directory joined with the container's log path ("": none).
func logPath(sandbox *runtimeapi.PodSandboxConfig, c *runtimeapi.ContainerConfig) string {
	if c.GetLogPath() == "" {
		return ""
	}
	return filepath.Join(sandbox.GetLogDirectory(), c.GetLogPath())
}

// link makes a started instance's link to its log file (kubelet's
// legacyLogSymlink, named by the sandbox's name and namespace); a failure
// is logged, as kubelet logs it, and fails nothing.
func (r *Restarter) link(ctx context.Context, sandbox *cri.Sandbox, inst *cri.Container) {
	if r.logs == nil {
		return
	}
	if err := r.logs.Link(sandbox.Namespace, sandbox.Name, inst); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to create legacy symbolic link", "containerID", inst.ID, "containerLogPath", inst.LogPath)
	}
}

// replacedBy is the instance an interrupted restart's replacement was to
// replace, as its annotation says.
func replacedBy(c *pods.Container, replacement *cri.Container) *cri.Container {
	for _, i := range c.Instances {
		if i.ID == replacement.Annotations[cri.AnnotationRestartOf] {
			return i
		}
	}
	return nil
}

// startFailed reports why a container could not be made: kubelet's
// waiting reason and its event.
func (r *Restarter) startFailed(ctx context.Context, w *podWorker, p *pods.Pod, c *pods.Container, err error) {
	var se *StartError
	if errors.As(err, &se) {
		w.state.failed[c.Name] = pods.Waiting{Reason: se.Reason, Message: se.Message}
		return // the maker told its own events (Failed, BackOff pulling image…)
	}
	if ctx.Err() != nil {
		return // the agent is stopping: not the container's failure
	}
	r.eventf(p, c.Name, events.Warning, ReasonFailed, "Cannot restart container %s: %v", c.Name, err)
}

// containerConfig returns the CRI configs a new instance is created with:
// a static pod's from its spec (the maker), another's from its last
// instance's own config, with the next attempt and its own log file, and
// marked as the agent's replacement of that instance.
func (r *Restarter) containerConfig(ctx context.Context, p *pods.Pod, sandbox *cri.Sandbox, s startAction) (*runtimeapi.ContainerConfig, *runtimeapi.PodSandboxConfig, error) {
	if p.Static {
		if r.maker == nil {
			return nil, nil, ErrNoMaker
		}
		return r.maker.Container(ctx, p, sandbox, s.container, s.attempt)
	}
	cfg, err := r.runtime.ContainerConfig(ctx, s.from.ID)
	if err != nil {
		return nil, nil, err
	}
	sandboxCfg, err := r.sandboxConfig(ctx, sandbox.ID)
	if err != nil {
		return nil, nil, err
	}
	attempt := uint32(s.attempt)
	cfg.Metadata.Attempt = attempt
	cfg.LogPath = nextLogPath(cfg.GetLogPath(), attempt)
	annotations := make(map[string]string, len(cfg.Annotations)+2)
	for k, v := range cfg.Annotations {
		annotations[k] = v
	}
	annotations[cri.AnnotationRestartOf] = s.from.ID
	annotations[cri.AnnotationRestartCause] = string(s.cause)
	pods.SetRestartCount(annotations, attempt)
	cfg.Annotations = annotations
	return cfg, sandboxCfg, nil
}

// postStart runs the container's postStart hook (kubelet's startContainer,
// step 4). A failed hook kills the instance with the pod's grace period
// (preStop first); it reports whether the hook passed.
func (r *Restarter) postStart(ctx context.Context, w *podWorker, p *pods.Pod, c *pods.Container, inst *cri.Container) bool {
	h := c.Spec.PostStart()
	if h == nil {
		return true
	}
	msg, err := r.hooks.Run(ctx, h, r.hookTarget(p, c, inst.ID))
	if err == nil {
		return true
	}
	if ctx.Err() != nil {
		return false // the agent is stopping: not the container's failure
	}
	// The hook's output only at -v=1, as kubelet: it may hold secrets.
	logger := klog.FromContext(ctx)
	logger.Error(err, "Failed to execute PostStartHook", "pod", klog.KRef(p.Namespace, p.Name), "containerName", c.Name, "containerID", inst.ID)
	logger.V(1).Info("PostStartHook output", "pod", klog.KRef(p.Namespace, p.Name), "containerName", c.Name, "message", msg)
	// Not the hook's output: it may hold secrets (kubelet's rule).
	r.eventf(p, c.Name, events.Warning, ReasonFailedPostStartHook, "PostStartHook failed")
	w.state.memory.killed[inst.ID] = true
	w.state.pending[inst.ID] = ledger.Entry{Time: r.clock.Now(), Namespace: p.Namespace, Pod: p.Name, PodUID: p.UID, Container: c.Name, ContainerID: inst.ID, Cause: string(CausePostStart)}
	if _, err := r.killContainer(ctx, p, c, inst, "FailedPostStartHook", CausePostStart, nil); err != nil {
		logger.Error(err, "Failed to kill container", "pod", klog.KRef(p.Namespace, p.Name), "containerName", c.Name, "containerID", inst.ID)
	}
	return false
}

// createSandbox makes a static pod's sandbox of attempt: its host side,
// then RunPodSandbox (kubelet's createPodSandbox).
func (r *Restarter) createSandbox(ctx context.Context, p *pods.Pod, attempt uint32) (*cri.Sandbox, error) {
	if r.maker == nil {
		r.eventf(p, "", events.Warning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", ErrNoMaker)
		return nil, ErrNoMaker
	}
	cfg, err := r.maker.Sandbox(ctx, p, attempt)
	var told *StartError
	if err != nil {
		if ctx.Err() == nil && !errors.As(err, &told) { // a StartError was told by the maker
			r.eventf(p, "", events.Warning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
		}
		return nil, err
	}
	id, err := r.runtime.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		if ctx.Err() == nil {
			r.eventf(p, "", events.Warning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
		}
		return nil, err
	}
	st, err := r.runtime.PodSandboxStatus(ctx, id, false)
	if err != nil {
		r.eventf(p, "", events.Warning, "FailedStatusPodSandBox", "Unable to get pod sandbox status: %v", err)
		return nil, err
	}
	r.configs.Store(id, cfg)
	return cri.SandboxFromStatus(st.GetStatus()), nil
}

// sandboxConfig returns a sandbox's CRI config, read once per sandbox.
func (r *Restarter) sandboxConfig(ctx context.Context, id string) (*runtimeapi.PodSandboxConfig, error) {
	if cached, ok := r.configs.Load(id); ok {
		return cached.(*runtimeapi.PodSandboxConfig), nil
	}
	cfg, err := r.runtime.SandboxConfig(ctx, id)
	if err != nil {
		return nil, err
	}
	r.configs.Store(id, cfg)
	return cfg, nil
}

var logAttempt = regexp.MustCompile(`^(.*?)(\d+)\.log$`)

// nextLogPath gives a new attempt its own log file, as kubelet names them
// (<name>/<attempt>.log); another path gets the attempt appended.
func nextLogPath(path string, attempt uint32) string {
	if path == "" {
		return ""
	}
	if m := logAttempt.FindStringSubmatch(path); m != nil {
		return m[1] + strconv.FormatUint(uint64(attempt), 10) + ".log"
	}
	return path + "." + strconv.FormatUint(uint64(attempt), 10)
}

// entry starts a ledger entry about an instance that is to be, or was,
// replaced, with its exit as the runtime records it.
func (r *Restarter) entry(ctx context.Context, p *pods.Pod, old *cri.Container, cause Cause) ledger.Entry {
	e := ledger.Entry{Time: r.clock.Now(), Namespace: p.Namespace, Pod: p.Name, PodUID: p.UID, Container: old.Name, ContainerID: old.ID, Cause: string(cause)}
	if r.ledger == nil {
		return e
	}
	if old.State == cri.StateExited {
		e.ExitCode, e.ExitReason = old.ExitCode, old.Reason
		return e
	}
	if st, err := r.runtime.ContainerStatus(ctx, old.ID, false); err == nil {
		e.ExitCode, e.ExitReason = st.GetStatus().GetExitCode(), st.GetStatus().GetReason()
	}
	return e
}

func (r *Restarter) record(ctx context.Context, e ledger.Entry) {
	if r.ledger == nil {
		return
	}
	if err := r.ledger.Add(e); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot record a restart", "pod", klog.KRef(e.Namespace, e.Pod), "containerName", e.Container)
	}
}
