package api

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cri-prober/cri-prober/pkg/restart"
)

// How the API's pods and text are shown to people, one rule for the status
// page and for clients of the JSON (`cri-prober status`): kubectl's
// columns, and text a workload controls made safe to show.

// ReadyCount is kubectl's READY column: ready regular containers and
// sidecars, of all of them; init containers never count.
func (p Pod) ReadyCount() (ready, total int) {
	for _, c := range p.Containers {
		if c.Kind == "init" {
			continue
		}
		total++
		if c.Ready {
			ready++
		}
	}
	return ready, total
}

// Restarts is kubectl's RESTARTS column: the containers' restarts added up.
func (p Pod) Restarts() uint32 {
	var n uint32
	for _, c := range p.Containers {
		n += c.RestartCount
	}
	return n
}

// Status is kubectl's STATUS column in short: Init:N/M while init
// containers run, Completed or Error once the pod is over, else the first
// reason a container is not running, else Running.
func (p Pod) Status() string {
	if len(p.Problems) > 0 {
		return "InvalidProbeConfig"
	}
	for _, c := range p.Containers {
		if len(c.Problems) > 0 {
			return "InvalidProbeConfig"
		}
	}
	switch p.Phase {
	case "Succeeded":
		return "Completed"
	case "Failed":
		return "Error"
	}
	inits, initialized := 0, 0
	for _, c := range p.Containers {
		switch {
		case c.Kind == "":
		case c.Reason == "Completed" || (c.Kind == "sidecar" && c.Started):
			inits++
			initialized++
		default:
			inits++
		}
	}
	if p.Phase == "Pending" && initialized < inits {
		return fmt.Sprintf("Init:%d/%d", initialized, inits)
	}
	for _, c := range p.Containers {
		if c.Kind == "" && c.State != "Running" {
			return c.State
		}
	}
	return "Running"
}

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
func ProbeFailures(e restart.Entry) string {
	threshold := 0
	if n := len(e.Failures); n > 0 {
		threshold = e.Failures[n-1].Threshold
	}
	return fmt.Sprintf("its %s probe failed %d time(s) in a row (failureThreshold %d)", e.Cause, len(e.Failures), threshold)
}
