// Package explain says, for each probe of a pod, when kubelet's semantics
// (which cri-prober follows) make things happen, and what looks wrong
// (cri-prober explain). It is pure: a spec.Pod in, Explanations out. The
// rules it reads are stated where they are decided: the kill's grace
// period in pkg/restart (GracePeriod, MinimumGracePeriod).
package explain

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Explanation says, for one probe of a container, when kubelet's semantics
// (which cri-prober follows) make things happen, and what looks wrong.
//
// Times assume a probe that fails fast (connection refused) for the
// earliest cases and one that runs to its timeout for the worst: a probe
// that hangs delays the next one, so the worst case paces runs at
// max(interval, timeout).
type Explanation struct {
	Container string
	Type      results.ProbeType
	Handler   string
	// Period is periodSeconds. StartInterval is the probe's startInterval
	// extension (0: none): its pace until it first succeeds for the
	// container (started, or first ready), Period after that.
	Period, StartInterval time.Duration
	// FirstRun is when the probe first runs after the container starts
	// (Earliest: at the initial delay; Latest: an interval later, since the
	// worker's ticker is not aligned with the container's start; after the
	// startup probe succeeds for liveness and readiness).
	FirstRun Window
	// Pass, for startup and readiness probes: from the app's first answer
	// (once the probe runs) to the probe passing (started; ready), at the
	// start pace.
	Pass Window
	// Detect is how long after the application breaks (or, for startup,
	// after the container starts) the threshold is reached.
	Detect Window
	// Act is when the consequence is done: for liveness and startup the
	// replacement starts (kill grace and the first restarts' zero back-off
	// included); for readiness, traffic stops (the same as Detect).
	Act Window
	// StartBudget, for a startup probe and for the liveness probe of a
	// container without one: how long after the container starts the app
	// may take to answer before it is restarted, at the earliest
	// (initialDelaySeconds + (failureThreshold−1) × its interval). 0 for
	// the others.
	StartBudget time.Duration
	GracePeriod int64 // for liveness and startup: the kill's grace period
	Warnings    []Warning
}

// Window is an earliest and a worst case.
type Window struct{ Earliest, Latest time.Duration }

func (w Window) String() string {
	if w.Earliest == w.Latest {
		return w.Earliest.String()
	}
	return w.Earliest.String() + " – " + w.Latest.String()
}

// Warning is a likely mistake in a probe's configuration, with what to do
// instead. Probes warns only about what can be changed: never about a
// value that is already the least the API allows.
type Warning struct {
	Kind    WarningKind
	Message string
}

func (w Warning) String() string { return w.Message }

// WarningKind says which mistake a Warning is about.
type WarningKind int

const (
	// WarnInertProbe: the probe names a port its container does not
	// declare: it errors at every run and never changes its result.
	WarnInertProbe WarningKind = iota + 1
	// WarnTimeoutOverPeriod: timeoutSeconds > periodSeconds, so a hung
	// app is detected later than the period suggests.
	WarnTimeoutOverPeriod
	// WarnLivenessThresholdOne: one slow liveness probe restarts.
	WarnLivenessThresholdOne
	// WarnLivenessLikeReadiness: liveness checks what readiness checks, no
	// more leniently.
	WarnLivenessLikeReadiness
	// WarnLivenessWithoutReadiness: the container is ready as soon as it
	// runs, and while liveness failures build up.
	WarnLivenessWithoutReadiness
	// WarnLongInitialDelay: a long liveness delay instead of a startup
	// probe.
	WarnLongInitialDelay
	// WarnShortStartBudget: with no start time given, a liveness probe
	// without a startup probe leaves the app under 10 s to start.
	WarnShortStartBudget
	// WarnStartBudgetUnderStartTime: the startup probe (or, without one,
	// liveness) restarts the container before the start time given.
	WarnStartBudgetUnderStartTime
	// WarnFrequentExec: an exec probe every 2 s or more often.
	WarnFrequentExec
	// WarnLongPodGrace: a probe kill waits a long pod grace period.
	WarnLongPodGrace
)

// Option tunes Probes.
type Option func(*options)

type options struct {
	startTime time.Duration
}

// WithStartTime says how long the app takes, after its container starts,
// to answer its probes (0 or less: unknown). Probes then warns when the
// startup probe (or, without one, liveness) would restart the container
// before that, saying what to set, instead of guessing at a short start
// budget.
func WithStartTime(d time.Duration) Option {
	return func(o *options) { o.startTime = max(d, 0) }
}

// Probes describes every probe of a pod: startup first, then readiness and
// liveness, container by container.
func Probes(pod *spec.Pod, opts ...Option) []Explanation {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var out []Explanation
	for i := range pod.Containers {
		c := &pod.Containers[i]
		var startup *Explanation
		for _, t := range []results.ProbeType{results.Startup, results.Readiness, results.Liveness} {
			if p := c.Probe(t); p != nil {
				e := explain(pod, c, t, p, startup, o)
				out = append(out, e)
				if t == results.Startup {
					startup = &e
				}
			}
		}
	}
	return out
}

func seconds(n int32) time.Duration { return time.Duration(n) * time.Second }

// timing is a probe's pace: its first interval (startInterval, else
// periodSeconds), its period once it has succeeded, and its timeout.
type timing struct {
	start, period, timeout time.Duration
}

func timingOf(c *spec.Container, t results.ProbeType, p *corev1.Probe) timing {
	tm := timing{start: seconds(p.PeriodSeconds), period: seconds(p.PeriodSeconds), timeout: seconds(p.TimeoutSeconds)}
	if ext := c.Extension(t); ext != nil && ext.StartInterval != nil {
		tm.start = ext.StartInterval.Duration
	}
	return tm
}

// failures is when n consecutive failures at interval are reached after
// the app breaks (or from the first run): at the earliest the first is at
// once and each next one an interval later; at worst the first is an
// interval away and each takes its timeout, pacing runs at max(interval,
// timeout).
func failures(n int32, interval, timeout time.Duration) Window {
	k := time.Duration(n - 1)
	return Window{Earliest: k * interval, Latest: interval + k*max(interval, timeout) + timeout}
}

func explain(pod *spec.Pod, c *spec.Container, t results.ProbeType, p *corev1.Probe, startup *Explanation, o options) Explanation {
	tm := timingOf(c, t, p)
	delay := seconds(p.InitialDelaySeconds)
	e := Explanation{Container: c.Name, Type: t, Handler: handlerName(p), Period: tm.period}
	if tm.start != tm.period {
		e.StartInterval = tm.start
	}
	e.FirstRun = Window{Earliest: delay, Latest: delay + tm.start}
	if t != results.Startup && startup != nil {
		// After startup succeeds: at once for readiness (triggered), at the
		// next tick for liveness; not before this probe's own delay. At
		// worst startup passes at its last chance.
		e.FirstRun = Window{Earliest: max(delay, startup.FirstRun.Earliest), Latest: max(delay, startup.Detect.Latest) + tm.start}
	}
	switch t {
	case results.Startup:
		// Never passing: the threshold counts from the first run.
		f := failures(p.FailureThreshold, tm.start, tm.timeout)
		e.Detect = Window{Earliest: delay + f.Earliest, Latest: delay + f.Latest}
		e.StartBudget = e.Detect.Earliest
	case results.Liveness:
		e.Detect = failures(p.FailureThreshold, tm.period, tm.timeout)
		if startup == nil {
			e.StartBudget = delay + e.Detect.Earliest
		}
	default:
		e.Detect = failures(p.FailureThreshold, tm.period, tm.timeout)
	}
	if t != results.Liveness {
		// successThreshold runs at the start pace, the first one an
		// interval away at worst (or a hung probe's timeout).
		k := time.Duration(p.SuccessThreshold - 1)
		e.Pass = Window{Earliest: k * tm.start, Latest: max(tm.start, tm.timeout) + k*tm.start}
	}
	e.Act = e.Detect
	if t != results.Readiness {
		// The grace period the kill starts with; no preStop hook is
		// counted.
		e.GracePeriod = max(restart.GracePeriod(pod.TerminationGracePeriodSeconds, p), restart.MinimumGracePeriod)
		// Earliest: the app exits at once on SIGTERM; worst: it is killed
		// after the grace period. The first restarts are not backed off.
		e.Act = Window{Earliest: e.Detect.Earliest, Latest: e.Detect.Latest + time.Duration(e.GracePeriod)*time.Second}
	}
	e.Warnings = warnings(pod, c, t, p, &e, o)
	return e
}

func handlerName(p *corev1.Probe) string {
	switch {
	case p.Exec != nil:
		return fmt.Sprintf("exec %q", p.Exec.Command)
	case p.HTTPGet != nil:
		return fmt.Sprintf("httpGet %s %s", p.HTTPGet.Port.String(), p.HTTPGet.Path)
	case p.TCPSocket != nil:
		return "tcpSocket " + p.TCPSocket.Port.String()
	case p.GRPC != nil:
		return fmt.Sprintf("grpc %d", p.GRPC.Port)
	default:
		return "no handler"
	}
}

// warnings points out the usual mistakes, each with what to do instead.
func warnings(pod *spec.Pod, c *spec.Container, t results.ProbeType, p *corev1.Probe, e *Explanation, o options) []Warning {
	var w []Warning
	warn := func(kind WarningKind, format string, args ...any) {
		w = append(w, Warning{Kind: kind, Message: fmt.Sprintf(format, args...)})
	}
	for _, inert := range spec.ProbePortWarnings(p, c.Ports, pod.Source != spec.SourceAnnotations, field.NewPath(strings.ToLower(t.String())+"Probe")) {
		warn(WarnInertProbe, "INERT: %s", inert.ErrorBody())
	}
	// Equal is harmless (a timed-out probe ends as the next one is due;
	// 1 and 1 are the least the API allows), and so is a single failure.
	if p.TimeoutSeconds > p.PeriodSeconds && p.FailureThreshold > 1 {
		warn(WarnTimeoutOverPeriod, "timeoutSeconds (%d) > periodSeconds (%d): a probe that hangs runs to its timeout and only then does the next one start, so a hung app is detected up to %s later than the period suggests; set timeoutSeconds to at most %d",
			p.TimeoutSeconds, p.PeriodSeconds, time.Duration(p.FailureThreshold-1)*seconds(p.TimeoutSeconds-p.PeriodSeconds), p.PeriodSeconds)
	}
	if t == results.Liveness {
		if p.FailureThreshold == 1 {
			warn(WarnLivenessThresholdOne, "failureThreshold 1: a single slow or failed probe restarts the container; 3 (the default) rides out a hiccup")
		}
		if r := c.Readiness; r != nil && reflect.DeepEqual(r.ProbeHandler, p.ProbeHandler) && r.FailureThreshold >= p.FailureThreshold && r.PeriodSeconds >= p.PeriodSeconds {
			warn(WarnLivenessLikeReadiness, "liveness probes what readiness probes, no more leniently: an overloaded app is restarted when it should only be taken out of traffic; give liveness a cheaper check or a larger failureThreshold")
		}
		if c.Readiness == nil {
			started := ""
			if c.Startup != nil {
				started = " and its startupProbe has passed"
			}
			warn(WarnLivenessWithoutReadiness, "livenessProbe without readinessProbe: the container counts as ready as soon as it runs%s, before the app may answer, and stays ready while liveness failures build up to a restart; add a readinessProbe (the same check with a lower failureThreshold takes it out of traffic sooner)", started)
		}
		if c.Startup == nil && p.InitialDelaySeconds >= 30 {
			warn(WarnLongInitialDelay, "initialDelaySeconds %d with no startupProbe: the container is unprotected for that long on every restart and restarted if it starts slower; use a startupProbe (failureThreshold × periodSeconds as the start budget) and drop the delay", p.InitialDelaySeconds)
		}
		if c.Startup == nil && o.startTime == 0 && p.InitialDelaySeconds == 0 && e.StartBudget < 10*time.Second {
			warn(WarnShortStartBudget, "no startupProbe and no initialDelaySeconds: the app must answer within %s of starting or it is restarted; add a startupProbe if it can start slower (explain --start-time checks a start time)", e.StartBudget)
		}
	}
	if o.startTime > 0 && e.StartBudget > 0 && e.StartBudget < o.startTime {
		w = append(w, startBudgetWarning(t, p, e, o.startTime))
	}
	if p.Exec != nil && p.PeriodSeconds <= 2 {
		warn(WarnFrequentExec, "exec probe every %d s: each run starts a process in the container through the runtime (tens of ms of CPU in containerd and runc); prefer httpGet, tcpSocket or grpc when the app can answer one, or a longer periodSeconds", p.PeriodSeconds)
	}
	if t != results.Readiness && p.TerminationGracePeriodSeconds == nil && pod.TerminationGracePeriodSeconds > 60 {
		warn(WarnLongPodGrace, "a failed %s probe waits the pod's terminationGracePeriodSeconds (%d s) before the kill; set the probe's own terminationGracePeriodSeconds", t, pod.TerminationGracePeriodSeconds)
	}
	return w
}

// startBudgetWarning says that a probe restarts a container before the
// app's start time, and what to set: a startup probe's failureThreshold,
// or a startup probe where liveness alone guards the start.
func startBudgetWarning(t results.ProbeType, p *corev1.Probe, e *Explanation, start time.Duration) Warning {
	interval, name := e.Period, "periodSeconds"
	if e.StartInterval > 0 {
		interval, name = e.StartInterval, "startInterval"
	}
	budget := fmt.Sprintf("%s after the container starts (initialDelaySeconds %d + (failureThreshold %d − 1) × %s %s)",
		e.StartBudget, p.InitialDelaySeconds, p.FailureThreshold, name, interval)
	if t == results.Startup {
		need := thresholdFor(start-seconds(p.InitialDelaySeconds), interval)
		return Warning{Kind: WarnStartBudgetUnderStartTime, Message: fmt.Sprintf(
			"the startup probe gives up on an app that does not answer yet %s, before its start time of %s: set failureThreshold to at least %d",
			budget, start, need)}
	}
	need := thresholdFor(start, e.Period)
	return Warning{Kind: WarnStartBudgetUnderStartTime, Message: fmt.Sprintf(
		"with no startupProbe, liveness restarts an app that does not answer yet %s, before its start time of %s: add a startupProbe with the same check, periodSeconds %d and failureThreshold %d (it waits %s), and liveness keeps its quick detection once the app is up",
		budget, start, p.PeriodSeconds, need, time.Duration(need-1)*e.Period)}
}

// thresholdFor is the least failureThreshold whose failures at interval
// span d: (n−1) × interval ≥ d.
func thresholdFor(d, interval time.Duration) int64 {
	if d <= 0 || interval <= 0 {
		return 1
	}
	return int64((d+interval-1)/interval) + 1
}
