package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// setVerbosity sends klog's records, at verbosity v, to stderr in a
// --log-format: text (klog's) or json (one JSON object per record, as
// Kubernetes components' --logging-format=json).
func setVerbosity(v int, logFormat string) {
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	_ = fs.Set("v", fmt.Sprint(v))
	logger := newLogger(os.Stderr, v)
	if logFormat == "json" {
		logger = newJSONLogger(os.Stderr, v)
	}
	klog.SetLoggerWithOptions(logger, klog.ContextualLogger(true))
}

// checkLogFormat validates --log-format.
func checkLogFormat(format string) error {
	if format != "text" && format != "json" {
		return fmt.Errorf("want text or json, not %q", format)
	}
	return nil
}

// newLogger is klog's text format with every value escaped: what a
// workload or a user supplied (probe output, error texts, pod and container
// names) reaches the log as one quoted line with control characters
// escaped. klog itself writes a value with a line break as an indented
// block, raw, so a probe's output could start what looks like a record of
// its own, or send escape sequences to an operator's terminal. Warnings
// (events.Warner) carry klog's W severity.
func newLogger(w io.Writer, v int) logr.Logger {
	text := func(out io.Writer) logr.LogSink {
		return textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(v), textlogger.Output(out))).GetSink()
	}
	return logr.New(escapingSink{sink: text(w), warnings: text(warningSeverity{w})})
}

// warningSeverity turns the I of the klog header of each record (written
// whole, in one Write) into W.
type warningSeverity struct{ w io.Writer }

func (s warningSeverity) Write(p []byte) (int, error) {
	if len(p) > 0 && p[0] == 'I' {
		p = append([]byte{'W'}, p[1:]...)
	}
	return s.w.Write(p)
}

// newJSONLogger writes one JSON object per record (time, level, msg,
// caller, and the key/value pairs), as Kubernetes' JSON logging does.
// JSON escapes every value: nothing a workload sends can break a record.
func newJSONLogger(w io.Writer, v int) logr.Logger {
	handler := slog.NewJSONHandler(w, &slog.HandlerOptions{AddSource: true, Level: slog.Level(-v)})
	return logr.New(newJSONSink(handler))
}

// jsonSink adds the warning level to logr's slog sink.
type jsonSink struct {
	logr.LogSink
	logger *slog.Logger
}

func newJSONSink(handler slog.Handler) jsonSink {
	return jsonSink{LogSink: logr.FromSlogHandler(handler).GetSink(), logger: slog.New(handler)}
}

// Warning logs at slog's WARN level, naming the warner's caller.
func (s jsonSink) Warning(msg string, kv ...any) {
	var pcs [1]uintptr
	runtime.Callers(2, pcs[:]) // skips Callers and Warning: the caller
	r := slog.NewRecord(time.Now(), slog.LevelWarn, msg, pcs[0])
	r.Add(kv...)
	_ = s.logger.Handler().Handle(context.Background(), r)
}

func (s jsonSink) WithValues(kv ...any) logr.LogSink {
	return jsonSink{LogSink: s.LogSink.WithValues(kv...), logger: s.logger.With(kv...)}
}

func (s jsonSink) WithName(name string) logr.LogSink {
	return jsonSink{LogSink: s.LogSink.WithName(name), logger: s.logger}
}

// escapingSink escapes the values of another sink's records.
type escapingSink struct {
	sink     logr.LogSink
	warnings logr.LogSink // the same, with klog's W severity
}

var _ logr.CallDepthLogSink = escapingSink{}

// Init counts this sink's own frame, so that records name their caller's
// file and line, not this file's.
func (s escapingSink) Init(info logr.RuntimeInfo) {
	s.warnings.Init(info) // Warning is called directly, not through logr.Logger
	info.CallDepth++
	s.sink.Init(info)
}

// Warning logs a record with the W severity (events.Warner).
func (s escapingSink) Warning(msg string, kv ...any) {
	s.warnings.Info(0, msg, escapeValues(kv)...)
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
	kv = escapeValues(kv)
	return escapingSink{sink: s.sink.WithValues(kv...), warnings: s.warnings.WithValues(kv...)}
}

func (s escapingSink) WithName(name string) logr.LogSink {
	return escapingSink{sink: s.sink.WithName(name), warnings: s.warnings.WithName(name)}
}

func (s escapingSink) WithCallDepth(depth int) logr.LogSink {
	d, ok := s.sink.(logr.CallDepthLogSink)
	w, wok := s.warnings.(logr.CallDepthLogSink)
	if !ok || !wok {
		return s
	}
	return escapingSink{sink: d.WithCallDepth(depth), warnings: w.WithCallDepth(depth)}
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
