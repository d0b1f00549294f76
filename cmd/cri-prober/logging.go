package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// setVerbosity sends klog's records, at verbosity v, through an escaping
// logger to stderr.
func setVerbosity(v int) {
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	_ = fs.Set("v", fmt.Sprint(v))
	klog.SetLoggerWithOptions(newLogger(os.Stderr, v), klog.ContextualLogger(true))
}

// newLogger is klog's text format with every value escaped: what a
// workload or a user supplied (probe output, error texts, pod and container
// names) reaches the log as one quoted line with control characters
// escaped. klog itself writes a value with a line break as an indented
// block, raw, so a probe's output could start what looks like a record of
// its own, or send escape sequences to an operator's terminal.
func newLogger(w io.Writer, v int) logr.Logger {
	sink := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(v), textlogger.Output(w))).GetSink()
	return logr.New(escapingSink{sink: sink})
}

// escapingSink escapes the values of another sink's records.
type escapingSink struct {
	sink logr.LogSink
}

var _ logr.CallDepthLogSink = escapingSink{}

// Init counts this sink's own frame, so that records name their caller's
// file and line, not this file's.
func (s escapingSink) Init(info logr.RuntimeInfo) {
	info.CallDepth++
	s.sink.Init(info)
}

func (s escapingSink) Enabled(level int) bool { return s.sink.Enabled(level) }

func (s escapingSink) Info(level int, msg string, kv ...any) {
	s.sink.Info(level, msg, escapeValues(kv)...)
}

// Error passes err as an escaped "err" value, where klog would write its
// text as it is.
func (s escapingSink) Error(err error, msg string, kv ...any) {
	if err != nil {
		kv = append([]any{"err", escaped(err.Error())}, kv...)
	}
	s.sink.Error(nil, msg, escapeValues(kv)...)
}

func (s escapingSink) WithValues(kv ...any) logr.LogSink {
	return escapingSink{sink: s.sink.WithValues(escapeValues(kv)...)}
}

func (s escapingSink) WithName(name string) logr.LogSink {
	return escapingSink{sink: s.sink.WithName(name)}
}

func (s escapingSink) WithCallDepth(depth int) logr.LogSink {
	if d, ok := s.sink.(logr.CallDepthLogSink); ok {
		return escapingSink{sink: d.WithCallDepth(depth)}
	}
	return s
}

// escapeValues replaces every text value (strings, errors, anything with a
// String method such as klog.KRef) with its escaped form; keys are ours.
func escapeValues(kv []any) []any {
	out := make([]any, len(kv))
	for i, v := range kv {
		if i%2 == 0 {
			out[i] = v
			continue
		}
		switch t := v.(type) {
		case string:
			out[i] = escaped(t)
		case error:
			out[i] = escaped(t.Error())
		case fmt.Stringer:
			out[i] = escaped(t.String())
		default:
			out[i] = v
		}
	}
	return out
}

// escaped is a value klog writes as it is told: here, quoted with Go's
// escapes (klog's text format calls WriteText for values that have it).
type escaped string

func (e escaped) WriteText(b *bytes.Buffer) { b.WriteString(strconv.Quote(string(e))) }

// MarshalLog serves JSON and other logr sinks: the plain string, which
// they escape themselves.
func (e escaped) MarshalLog() any { return string(e) }
