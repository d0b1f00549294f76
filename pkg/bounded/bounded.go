// Package bounded cuts text that came from a workload (probe output, a
// response's status line, a server's error message) to a stated size where
// it enters the agent, so that no workload can make the agent keep more
// than that per result, history entry, event, ledger entry or log line.
package bounded

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

const (
	// Output is how much of a probe's or hook's output is kept: kubelet's
	// 10 KiB (maxReadLength for exec output, maxRespBodyLength for HTTP
	// bodies), so events read as kubelet's.
	Output = 10 << 10
	// Message is how much of an error text is kept (a transport error
	// quoting a status line, a gRPC status message, a runtime's error), and
	// how much of an output each history and ledger entry keeps.
	Message = 1 << 10
)

// String returns s if it is at most limit bytes, else its first bytes (cut
// on a UTF-8 boundary) followed by a marker saying how much was cut. The
// marker is extra: the result is at most limit plus a few dozen bytes.
func String(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && cut > limit-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)-cut) + " more bytes cut)"
}

// Within is String with the marker counted: the result is at most limit
// bytes whole, for a text that has a hard size (limit must leave room for
// a marker, a few dozen bytes).
func Within(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	// The marker names how much was cut, at most len(s) bytes.
	marker := len("… ( more bytes cut)") + len(strconv.Itoa(len(s)))
	return String(s, max(limit-marker, 0))
}

// Error returns err if its text is at most limit bytes, else an error
// whose text is cut to limit. The cut error does not wrap err, on purpose:
// keeping err would keep its whole text; classify (errors.Is) before
// cutting.
func Error(err error, limit int) error {
	if err == nil || len(err.Error()) <= limit {
		return err
	}
	return errors.New(String(err.Error(), limit))
}
