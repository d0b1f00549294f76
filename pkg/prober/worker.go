package prober

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// workerKey identifies a worker: one per pod, container name and probe type,
// living across restarts of the container, as in kubelet.
type workerKey struct {
	pod       string // pods.Pod.Key
	container string
	probeType results.ProbeType
}

// podReader gives a worker its pod as the latest view shows it.
type podReader interface {
	pod(key string) (*pods.Pod, bool)
}

// probeRunner runs one probe (with retries) against a target.
type probeRunner interface {
	probe(ctx context.Context, p *corev1.Probe, t Target) outcome
}

var _ probeRunner = (*dispatcher)(nil)

// reportedExecWait is the wait for an exec slot worth an event: shorter
// waits show only in cri_prober_exec_queue_wait_seconds.
const reportedExecWait = time.Second

// worker probes one container of a pod with one probe, with kubelet's
// decision sequence (see step). The scheduler runs its steps on a grid of
// periodSeconds, or at once when triggered.
//
// Fields below the line are owned by the step in flight (the scheduler
// runs one step of a worker at a time).
type worker struct {
	key       workerKey
	namespace string
	podName   string
	container *spec.Container
	probe     *corev1.Probe
	initial   results.Result

	clock    clock.WithTicker
	pods     podReader
	runner   probeRunner
	results  *results.Store
	recorder Recorder
	// failureEvents: which event a failure makes (failureEvent).
	failureEvents FailureEvents
	metrics       *workerMetrics
	lateness      prometheus.Observer
	history       *results.History // nil: none kept
	// restore gives what a previous agent saved for a probe (nil: none).
	restore func(results.Key) (results.Saved, bool)
	// killWaits: the kill of a failed container waits (WithKillWaits).
	killWaits func(containerID string) bool

	// ---
	containerID string
	lastResult  results.Result
	resultRun   int
	onHold      bool
	// heldFailed: the hold is after a failure (not a startup success).
	heldFailed bool
	// settled: this container's probe has succeeded once (started, or
	// first ready); until then a startInterval applies.
	settled bool
}

// initialResult is what a worker writes when it first sees a container:
// readiness false until the first success, liveness presumed alive,
// startup not started.
func initialResult(t results.ProbeType) results.Result {
	switch t {
	case results.Readiness:
		return results.Failure
	case results.Liveness:
		return results.Success
	default:
		return results.Unknown
	}
}

func (w *worker) resultKey() results.Key {
	return results.Key{ContainerID: w.containerID, Type: w.key.probeType}
}

// resume returns the result a new container starts with: kubelet's
// initial value, or, for a container the previous agent probed (--state-
// dir), where that agent left it — readiness and started, and the run of
// results toward a threshold. A liveness or startup Failure is not taken
// over: acting on it is this agent's decision, after its own probes.
func (w *worker) resume() results.Result {
	if w.restore == nil {
		return w.initial
	}
	sv, ok := w.restore(w.resultKey())
	if !ok {
		return w.initial
	}
	w.lastResult, w.resultRun = sv.LastOutcome, sv.Consecutive
	r := resumedResult(w.key.probeType, sv)
	w.settled = r == results.Success
	return r
}

// resumedResult is the result a probe resumes with from saved state.
func resumedResult(t results.ProbeType, sv results.Saved) results.Result {
	if t != results.Readiness && sv.Result == results.Failure {
		return initialResult(t)
	}
	return sv.Result
}

// interval is the time between two probes: periodSeconds, or the probe's
// startInterval while its container has not yet succeeded once.
func (w *worker) interval() time.Duration {
	if ext := w.container.Extension(w.key.probeType); ext != nil && ext.StartInterval != nil && !w.settled {
		return ext.StartInterval.Duration
	}
	return time.Duration(w.probe.PeriodSeconds) * time.Second
}

// step is one tick of kubelet's doProbe: it decides whether to probe,
// probes, applies the thresholds and records the stable result. It returns
// whether the worker should keep going.
func (w *worker) step(ctx context.Context) (keepGoing bool) {
	p, ok := w.pods.pod(w.key.pod)
	if !ok {
		return true // the pod is not known yet
	}
	if p.Phase == corev1.PodFailed || p.Phase == corev1.PodSucceeded {
		return false
	}
	pc, ok := p.Container(w.key.container)
	if !ok || pc.Current == nil {
		return true // the container does not exist yet
	}
	c := pc.Current

	if c.ID != w.containerID {
		// A new container (first one, or a restart): start over.
		if w.containerID != "" {
			w.results.Remove(w.resultKey())
		}
		w.containerID = c.ID
		w.onHold, w.settled = false, false
		w.results.Set(w.resultKey(), w.resume(), w.key.pod)
	}
	if w.onHold {
		if !w.heldFailed || w.killWaits == nil || !w.killWaits(c.ID) {
			return true // until a new container replaces the failed one
		}
		w.onHold = false // its kill waits: probe on, report on
	}

	if c.State != cri.StateRunning {
		if c.State == cri.StateCreated && w.key.probeType != results.Readiness {
			// Created but not started (crictl create, start later). kubelet
			// writes Failure here, but it starts what it creates in the same
			// sync, so the Failure never meets a running container; ours
			// would outlive the start and get the container killed for a
			// probe that never ran. Keep the initial value until it runs.
			return true
		}
		w.results.Set(w.resultKey(), results.Failure, w.key.pod)
		// Stop only when the container is over and will not be restarted.
		return c.State != cri.StateExited || pc.Spec.ShouldRestart(p.Policy.RestartPolicy, c.ExitCode)
	}

	if p.Terminating && w.key.probeType != results.Readiness {
		// A pod shutting down must not be killed by its liveness probe.
		w.results.Set(w.resultKey(), results.Success, w.key.pod)
		return false
	}

	now := w.clock.Now()
	if int32(now.Sub(c.StartedAt).Seconds()) < w.probe.InitialDelaySeconds {
		return true
	}
	started := w.results.Started(results.Container{ID: c.ID, Running: true, HasStartupProbe: pc.Spec != nil && pc.Spec.Startup != nil})
	if started == (w.key.probeType == results.Startup) {
		// Startup probes stop once started (the worker stays for the next
		// container); the others wait until then.
		return true
	}

	t := TargetFor(p, c.ID, w.container, "")
	t.Extensions = w.container.Extension(w.key.probeType)
	o := w.runner.probe(ctx, w.probe, t)
	if ctx.Err() != nil {
		return true // stopping: the loop will notice
	}
	elapsed := w.clock.Since(now)
	w.metrics.observe(o, elapsed.Seconds())
	if o.queued >= reportedExecWait {
		w.event(events.Warning, ReasonExecProbeQueued, "%s probe waited %s for an exec slot of the pod (--max-concurrent-exec-per-pod); the wait is not counted against its timeout",
			w.key.probeType, o.queued.Round(time.Millisecond))
	}
	if o.err != nil {
		// Could not probe: thrown away, never counted toward a threshold.
		klog.FromContext(ctx).V(1).Info("Probe errored", "probeType", w.key.probeType, "pod", klog.KRef(w.namespace, w.podName), "containerName", w.key.container, "reason", o.reason, "err", o.err)
		w.observe(now, elapsed, o, 0, 0, false)
		switch o.reason {
		case ReasonAgentResources:
			w.event(events.Warning, ReasonAgentResourceExhausted, "%s probe could not run, the agent is out of resources: %v; the result is unknown and not counted against the container",
				w.key.probeType, o.err)
		case ReasonAgentOverload:
			w.event(events.Warning, ReasonAgentResourceExhausted, "%s probe timed out while %v; the result is unknown and not counted against the container",
				w.key.probeType, o.err)
		default:
			w.event(events.Warning, ReasonUnhealthy, "%s probe errored and resulted in unknown state: %v", w.key.probeType, o.err)
		}
		return true
	}
	if o.result == w.lastResult {
		w.resultRun++
	} else {
		w.lastResult = o.result
		w.resultRun = 1
	}
	threshold := int(w.probe.SuccessThreshold)
	if o.result == results.Failure {
		threshold = int(w.probe.FailureThreshold)
	}
	switch o.raw {
	case results.OutcomeFailure:
		w.record(failureEvent(w.failureEvents, w.key.probeType, o.output, w.resultRun, threshold))
	case results.OutcomeWarning:
		w.event(events.Warning, ReasonProbeWarning, "%s probe warning: %s", w.key.probeType, o.output)
	}
	changed := w.resultRun >= threshold && w.results.Set(w.resultKey(), o.result, w.key.pod)
	w.observe(now, elapsed, o, w.resultRun, threshold, changed)
	if w.resultRun < threshold {
		return true // below the threshold: the stable result stands
	}

	if changed {
		w.transitioned(o.result)
	}
	if o.result == results.Success {
		w.settled = true
	}
	if (w.key.probeType == results.Liveness && o.result == results.Failure) || w.key.probeType == results.Startup {
		// Hold until a new container: a failed container is about to be
		// replaced and a started one needs no more startup probes. The
		// next container gets a full threshold.
		w.onHold, w.heldFailed = true, o.result == results.Failure
		w.resultRun = 0
	}
	return true
}

func (w *worker) observe(at time.Time, elapsed time.Duration, o outcome, run, threshold int, changed bool) {
	obs := results.Observation{Time: at, Duration: elapsed, Outcome: o.raw, Output: o.output, Consecutive: run, Threshold: threshold,
		Changed: changed, ContainerID: w.containerID}
	if o.err != nil {
		obs.Err = o.err.Error()
	}
	w.results.Observe(w.resultKey(), obs)
	if w.history != nil {
		w.history.Add(obs)
	}
}

// transitioned tells about a change of the stable result that a threshold
// caused (initial values and container changes are not news).
func (w *worker) transitioned(r results.Result) {
	name := w.key.container
	switch {
	case w.key.probeType == results.Readiness && r == results.Success:
		w.record(events.Event{Type: events.Normal, Reason: ReasonContainerReady, Transition: events.TransitionReady,
			Message: fmt.Sprintf("Container %s is ready", name)})
	case w.key.probeType == results.Readiness:
		times := fmt.Sprintf("%d times in a row", w.probe.FailureThreshold)
		if w.probe.FailureThreshold == 1 {
			times = "once"
		}
		w.record(events.Event{Type: events.Warning, Reason: ReasonContainerNotReady, Transition: events.TransitionNotReady,
			Message: fmt.Sprintf("Container %s is not ready: readiness probe failed %s", name, times)})
	case w.key.probeType == results.Startup && r == results.Success:
		w.event(events.Normal, ReasonStartupSucceeded, "Container %s started: startup probe succeeded", name)
	case w.key.probeType == results.Startup:
		w.event(events.Warning, ReasonStartupFailed, "Container %s failed startup probe", name)
	case w.key.probeType == results.Liveness && r == results.Failure:
		w.event(events.Warning, ReasonLivenessFailed, "Container %s failed liveness probe", name)
	}
}

func (w *worker) event(eventType, reason, format string, args ...any) {
	w.record(events.Event{Type: eventType, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// record sends e about the worker's container, now.
func (w *worker) record(e events.Event) {
	e.Time, e.Namespace, e.Pod, e.Container = w.clock.Now(), w.namespace, w.podName, w.key.container
	w.recorder.Record(e)
}
