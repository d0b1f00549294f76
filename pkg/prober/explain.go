package prober

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// Explanation says, for one probe of a container, when kubelet's semantics
// (which cri-prober follows) make things happen, and what looks wrong.
type Explanation struct {
	Container string
	Type      results.ProbeType
	Handler   string
	// FirstRun is when the probe first runs after the container starts
	// (Earliest: at the initial delay; Latest: a period later, since the
	// worker's ticker is not aligned with the container's start; after the
	// startup probe succeeds for liveness and readiness).
	FirstRun Window
	// Detect is how long after the application breaks (or, for startup,
	// after the container starts) the threshold is reached.
	Detect Window
	// Act is when the consequence is done: for liveness and startup the
	// replacement starts (kill grace and the first restarts' zero back-off
	// included); for readiness, traffic stops (the same as Detect).
	Act         Window
	GracePeriod int64 // for liveness and startup: the kill's grace period
	Warnings    []string
}

// Window is an earliest and a worst case.
type Window struct{ Earliest, Latest time.Duration }

func (w Window) String() string {
	if w.Earliest == w.Latest {
		return w.Earliest.String()
	}
	return w.Earliest.String() + " – " + w.Latest.String()
}

// kubelet's maximum CrashLoopBackOff, reached after repeated restarts.
const maxBackoff = 300 * time.Second

// Explain describes every probe of a pod.
func Explain(pod *spec.Pod) []Explanation {
	var out []Explanation
	for i := range pod.Containers {
		c := &pod.Containers[i]
		for _, t := range []results.ProbeType{results.Startup, results.Readiness, results.Liveness} {
			if p := c.Probe(t); p != nil {
				out = append(out, explain(pod, c, t, p))
			}
		}
	}
	return out
}

func seconds(n int32) time.Duration { return time.Duration(n) * time.Second }

func explain(pod *spec.Pod, c *spec.Container, t results.ProbeType, p *corev1.Probe) Explanation {
	period, timeout, delay := seconds(p.PeriodSeconds), seconds(p.TimeoutSeconds), seconds(p.InitialDelaySeconds)
	e := Explanation{Container: c.Name, Type: t, Handler: handlerName(p)}
	e.FirstRun = Window{Earliest: delay, Latest: delay + period}
	if t != results.Startup && c.Startup != nil {
		s := c.Startup
		// After startup succeeds: at once for readiness (triggered), at the
		// next tick for liveness; not before this probe's own delay.
		e.FirstRun = Window{Earliest: max(delay, seconds(s.InitialDelaySeconds)), Latest: max(delay, seconds(s.InitialDelaySeconds)+seconds(s.PeriodSeconds)*time.Duration(s.FailureThreshold)+seconds(s.TimeoutSeconds)) + period}
	}
	threshold := time.Duration(p.FailureThreshold)
	if t == results.Startup {
		// Never passing: the threshold counts from the first run.
		e.Detect = Window{Earliest: delay + (threshold-1)*period, Latest: delay + threshold*period + timeout}
	} else {
		e.Detect = Window{Earliest: (threshold - 1) * period, Latest: threshold*period + timeout}
	}
	e.Act = e.Detect
	if t != results.Readiness {
		e.GracePeriod = max(pod.TerminationGracePeriodSeconds, 2)
		if p.TerminationGracePeriodSeconds != nil {
			e.GracePeriod = max(*p.TerminationGracePeriodSeconds, 2)
		}
		// Earliest: the app exits at once on SIGTERM; worst: it is killed
		// after the grace period. The first restarts are not backed off.
		e.Act = Window{Earliest: e.Detect.Earliest, Latest: e.Detect.Latest + time.Duration(e.GracePeriod)*time.Second}
	}
	e.Warnings = warnings(pod, c, t, p)
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
func warnings(pod *spec.Pod, c *spec.Container, t results.ProbeType, p *corev1.Probe) []string {
	var w []string
	for _, inert := range spec.ProbePortWarnings(p, c.Ports, pod.Source != spec.SourceAnnotations, field.NewPath(strings.ToLower(t.String())+"Probe")) {
		w = append(w, "INERT: "+inert.ErrorBody())
	}
	if p.TimeoutSeconds >= p.PeriodSeconds {
		w = append(w, fmt.Sprintf("timeoutSeconds (%d) ≥ periodSeconds (%d): a probe that times out delays the next one, so detection is slower than the period suggests; keep the timeout below the period", p.TimeoutSeconds, p.PeriodSeconds))
	}
	if t == results.Liveness {
		if p.FailureThreshold == 1 {
			w = append(w, "failureThreshold 1: a single slow or failed probe restarts the container; 3 (the default) rides out a hiccup")
		}
		if r := c.Readiness; r != nil && reflect.DeepEqual(r.ProbeHandler, p.ProbeHandler) && r.FailureThreshold >= p.FailureThreshold && r.PeriodSeconds >= p.PeriodSeconds {
			w = append(w, "liveness probes what readiness probes, no more leniently: an overloaded app is restarted when it should only be taken out of traffic; give liveness a cheaper check or a larger failureThreshold")
		}
		if c.Startup == nil && p.InitialDelaySeconds >= 30 {
			w = append(w, fmt.Sprintf("initialDelaySeconds %d with no startupProbe: the container is unprotected for that long on every restart and restarted if it starts slower; use a startupProbe (failureThreshold × periodSeconds as the start budget) and drop the delay", p.InitialDelaySeconds))
		}
		if c.Startup == nil && p.InitialDelaySeconds == 0 && p.FailureThreshold*p.PeriodSeconds < 10 {
			w = append(w, fmt.Sprintf("no startupProbe and no initialDelaySeconds: the app must answer within %d s of starting or it is restarted; add a startupProbe if it can start slower", p.FailureThreshold*p.PeriodSeconds))
		}
	}
	if p.Exec != nil && p.PeriodSeconds <= 2 {
		w = append(w, fmt.Sprintf("exec probe every %d s: each run starts a process in the container through the runtime (tens of ms of CPU in containerd and runc); prefer httpGet, tcpSocket or grpc when the app can answer one", p.PeriodSeconds))
	}
	if t != results.Readiness && p.TerminationGracePeriodSeconds == nil && pod.TerminationGracePeriodSeconds > 60 {
		w = append(w, fmt.Sprintf("a failed %s probe waits the pod's terminationGracePeriodSeconds (%d s) before the kill; set the probe's own terminationGracePeriodSeconds", t, pod.TerminationGracePeriodSeconds))
	}
	return w
}

// CrashLoopWorst is the longest a restart can wait once a container keeps
// failing (kubelet's back-off cap).
func CrashLoopWorst() time.Duration { return maxBackoff }
