package api

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

// How the API's pods and text are shown to people, one rule for the status
// page and for clients of the JSON (`cri-prober status`): kubectl's
// columns, and text a workload controls made safe to show.

// podRow is what kubectl's printPod (pkg/printers/internalversion/
// printers.go) shows of a pod in its READY, STATUS and RESTARTS columns.
type podRow struct {
	ready, total int
	status       string
	restarts     int
	lastRestart  time.Time
}

// row is kubectl 1.36's printPod over the pod's kubelet status: the
// reason is the pod's (DeadlineExceeded), else its phase; then the first
// init container not done says Init:N/M, Init:<reason> or
// Init:ExitCode:N; once initialized, the first regular container that
// waits with a reason or terminated says it (a Completed one gives way to
// Running, NotReady or another's error); a pod being deleted is
// Terminating. READY counts the ready regular containers and started,
// ready sidecars; RESTARTS adds up the restart counts (the regular init
// containers' only while the pod initializes), with the newest last exit.
func (p Pod) row() podRow {
	var inits, regular []Container
	for _, c := range p.Containers {
		if c.Kind == "" {
			regular = append(regular, c)
		} else {
			inits = append(inits, c)
		}
	}
	r := podRow{status: p.Phase, total: len(regular)}
	if p.Reason != "" {
		r.status = p.Reason
	}
	var sidecarRestarts int
	var lastSidecarRestart time.Time
	lastExit := func(c Container, last *time.Time) {
		if t := c.Status.LastState.Terminated; t != nil && t.FinishedAt != nil && t.FinishedAt.After(*last) {
			*last = *t.FinishedAt
		}
	}
	for _, c := range inits {
		if c.Kind == "sidecar" {
			r.total++
		}
	}
	initializing := false
	for i, c := range inits {
		r.restarts += int(c.RestartCount)
		lastExit(c, &r.lastRestart)
		if c.Kind == "sidecar" {
			sidecarRestarts += int(c.RestartCount)
			lastExit(c, &lastSidecarRestart)
		}
		st := c.state()
		switch {
		case st.Terminated != nil && st.Terminated.ExitCode == 0:
			continue
		case c.Kind == "sidecar" && c.Started:
			if c.Ready {
				r.ready++
			}
			continue
		case st.Terminated != nil:
			if st.Terminated.Reason == "" {
				r.status = fmt.Sprintf("Init:ExitCode:%d", st.Terminated.ExitCode)
			} else {
				r.status = "Init:" + st.Terminated.Reason
			}
		case st.Waiting != nil && st.Waiting.Reason != "" && st.Waiting.Reason != "PodInitializing":
			r.status = "Init:" + st.Waiting.Reason
		default:
			r.status = fmt.Sprintf("Init:%d/%d", i, len(inits))
		}
		initializing = true
		break
	}
	if !initializing || p.condition("Initialized") {
		r.restarts, r.lastRestart = sidecarRestarts, lastSidecarRestart
		hasRunning, errorReason := false, ""
		for i := len(regular) - 1; i >= 0; i-- {
			c := regular[i]
			r.restarts += int(c.RestartCount)
			lastExit(c, &r.lastRestart)
			st := c.state()
			switch {
			case st.Waiting != nil && st.Waiting.Reason != "":
				r.status = st.Waiting.Reason
			case st.Terminated != nil:
				if st.Terminated.Reason != "" {
					r.status = st.Terminated.Reason
				} else {
					r.status = fmt.Sprintf("ExitCode:%d", st.Terminated.ExitCode)
				}
				if st.Terminated.ExitCode != 0 {
					errorReason = r.status
				}
			case c.Ready && st.Running != nil:
				hasRunning = true
				r.ready++
			}
		}
		// A container still running turns Completed back.
		if r.status == "Completed" {
			switch {
			case hasRunning && p.condition("Ready"):
				r.status = "Running"
			case errorReason != "":
				r.status = errorReason
			case hasRunning:
				r.status = "NotReady"
			}
		}
	}
	if p.Terminating && p.Phase != "Succeeded" && p.Phase != "Failed" {
		r.status = "Terminating"
	}
	return r
}

// condition reports whether the pod's condition of type t is True. An
// agent that sends no conditions has said whether the pod is Ready.
func (p Pod) condition(t string) bool {
	for _, c := range p.Conditions {
		if c.Type == t {
			return c.Status == "True"
		}
	}
	return len(p.Conditions) == 0 && t == "Ready" && p.Ready
}

// state is the container's kubelet state; for an agent that sends none,
// what its older summary says of it (the CRI state, or the reason it
// waits).
func (c Container) state() ContainerState {
	if s := c.Status.State; s.Waiting != nil || s.Running != nil || s.Terminated != nil {
		return s
	}
	switch c.State {
	case "":
		return ContainerState{}
	case "Running":
		return ContainerState{Running: &StateRunning{StartedAt: c.StartedAt}}
	case "Exited":
		return ContainerState{Terminated: &StateTerminated{ExitCode: c.ExitCode, Reason: c.Reason, StartedAt: c.StartedAt}}
	case "Created", "Unknown", "Waiting":
		return ContainerState{Waiting: &StateWaiting{}}
	default:
		return ContainerState{Waiting: &StateWaiting{Reason: c.State}}
	}
}

// ReadyCount is kubectl's READY column: ready regular containers and
// started, ready sidecars, of all of them; regular init containers never
// count.
func (p Pod) ReadyCount() (ready, total int) {
	r := p.row()
	return r.ready, r.total
}

// Restarts is the number in kubectl's RESTARTS column.
func (p Pod) Restarts() int { return p.row().restarts }

// RestartsText is kubectl's RESTARTS column: the restarts, and how long
// ago the newest last exit was ("3 (5m2s ago)").
func (p Pod) RestartsText(now time.Time) string {
	r := p.row()
	if r.restarts != 0 && !r.lastRestart.IsZero() {
		return fmt.Sprintf("%d (%s ago)", r.restarts, Age(r.lastRestart, now))
	}
	return strconv.Itoa(r.restarts)
}

// Status is kubectl's STATUS column (row), or InvalidProbeConfig for a
// pod whose configuration the agent refused.
func (p Pod) Status() string {
	if len(p.Problems) > 0 {
		return "InvalidProbeConfig"
	}
	for _, c := range p.Containers {
		if len(c.Problems) > 0 {
			return "InvalidProbeConfig"
		}
	}
	return p.row().status
}

// Text says a container state in a few words, as kubectl describe's
// State line begins: Running; the waiting reason (Waiting with none: made,
// not started); the exit's reason, with its code when not 0 (Terminated
// with no reason); "" for no state.
func (s ContainerState) Text() string {
	switch {
	case s.Running != nil:
		return "Running"
	case s.Waiting != nil && s.Waiting.Reason != "":
		return s.Waiting.Reason
	case s.Waiting != nil:
		return "Waiting"
	case s.Terminated != nil:
		text := s.Terminated.Reason
		if text == "" {
			text = "Terminated"
		}
		if s.Terminated.ExitCode != 0 {
			text += fmt.Sprintf(" (exit code %d)", s.Terminated.ExitCode)
		}
		return text
	}
	return ""
}

// StateText is the container's state in a few words (ContainerState.Text).
func (c Container) StateText() string { return c.state().Text() }

// Shown is text a workload controls (a termination message, a waiting
// message, a condition's message) as a line to show: at most limit bytes,
// Printable.
func Shown(s string, limit int) string { return Printable(bounded.String(s, limit)) }

// Age renders how long ago t was as kubectl does: 42s, 5m3s, 3h12m, 2d4h;
// "-" for the zero time.
func Age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t).Round(time.Second)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%dh", int(d.Hours()/24), int(d.Hours())%24)
	}
}

// Printable shows text a workload controls (probe output, messages,
// names) without letting it act on what shows it: control characters
// (terminal escape sequences) as \xNN, characters that reorder text
// (bidirectional overrides, which can make a line read as another) as
// \uNNNN, line breaks and tabs as spaces.
func Printable(s string) string {
	if !strings.ContainsFunc(s, unprintable) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(r) || r == utf8.RuneError:
			fmt.Fprintf(&b, "\\x%02x", r)
		case unicode.Is(unicode.Bidi_Control, r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func unprintable(r rune) bool {
	return unicode.IsControl(r) || r == utf8.RuneError || unicode.Is(unicode.Bidi_Control, r)
}

// ProbeFailures says how a probe reached its failure threshold before a
// restart, in the words of `cri-prober why` and the status page alike.
func ProbeFailures(e Restart) string {
	threshold := 0
	if n := len(e.Failures); n > 0 {
		threshold = e.Failures[n-1].Threshold
	}
	return fmt.Sprintf("its %s probe failed %d time(s) in a row (failureThreshold %d)", e.Cause, len(e.Failures), threshold)
}
