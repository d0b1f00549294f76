package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
)

// What a workload or a user supplied reaches the log as one line per
// record, with no control character a terminal would act on.
func TestLogRecordsAreOneEscapedLine(t *testing.T) {
	var buf bytes.Buffer
	logger := newLogger(&buf, 2)
	hostile := "ok\nE1124 00:00:00.000000 1 fake.go:1] \"forged record\"\x1b[2J\x1b]0;title\x07"
	logger.Info("Event", "message", hostile, "pod", klog.KRef("ns\n", "web\x1b[31m"))
	logger.Error(errors.New("dial: "+hostile), "Probe errored", "output", []byte("raw\nbytes"))
	logger.WithValues("container", "app\r\n").V(1).Info("With values")

	out := buf.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	assert.Len(t, lines, 3, "one line per record:\n%s", out)
	assert.NotContains(t, out, "\x1b", "no escape sequence reaches a terminal")
	assert.NotContains(t, out, "\x07")
	assert.NotContains(t, out, "\r")
	assert.Contains(t, lines[0], `message="ok\nE1124`, "escaped, still readable")
	assert.Contains(t, lines[0], `pod="ns\n/web\x1b[31m"`)
	assert.Contains(t, lines[1], `err="dial: ok\n`)
	assert.Contains(t, lines[2], `container="app\r\n"`)
	for _, l := range lines {
		assert.Contains(t, l, " logging_test.go:", "each record names its caller, not the escaping sink")
	}
}

// Records logged through klog's functions, as the agent's packages log,
// name their caller too.
func TestKlogRecordsNameTheirCaller(t *testing.T) {
	var buf bytes.Buffer
	klog.SetLoggerWithOptions(newLogger(&buf, 2), klog.ContextualLogger(true))
	t.Cleanup(klog.ClearLogger)
	klog.InfoS("Structured", "pod", klog.KRef("ns", "web"))
	klog.ErrorS(errors.New("boom"), "Failed")
	klog.FromContext(context.Background()).Info("Contextual")
	klog.Background().V(1).Info("Verbose")

	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	require.Len(t, lines, 4, buf.String())
	for _, l := range lines {
		assert.Contains(t, l, " logging_test.go:", "each record names its caller")
	}
}

// Names, outputs and errors that came from workloads or users are shown
// with their control characters escaped, whichever command prints them.
func TestTerminalOutputIsEscaped(t *testing.T) {
	const evil = "x\x1b]0;pwned\x07\x1b[2J"
	now := time.Now()
	var b bytes.Buffer
	printStatus(&b, []api.Pod{{Namespace: "ns" + evil, Name: "web" + evil, Containers: []api.Container{{Name: "app" + evil, State: "Running"}}}}, now, false, true)
	printWhy(&b, api.Restart{Namespace: "ns", Pod: "web" + evil, Container: "app" + evil, Cause: "liveness", ExitReason: "Error" + evil,
		Failures: []api.RestartFailure{{Output: "out" + evil}}}, false)
	podWaitState(api.PodFromReport(pods.PodReport{Namespace: "ns", Name: "web", Problems: []string{"bad" + evil},
		Containers: []pods.ContainerReport{{Name: "app" + evil, Probes: []pods.ProbeReport{{Type: results.Liveness,
			Last: &results.Observation{Outcome: results.OutcomeFailure, Output: "out" + evil, Err: "err" + evil}}}}}})).print(&b)
	printHistory(&b, api.History{Namespace: "ns", Name: "web" + evil, Probes: []api.ProbeHistory{{Container: "app" + evil, Type: "liveness",
		Recent: []api.Run{{Result: "failure", Output: "out" + evil}}}}}, false)
	out := b.String()
	assert.NotContains(t, out, "\x1b", out)
	assert.NotContains(t, out, "\x07", out)
	assert.Contains(t, out, `x\x1b]0;pwned\x07\x1b[2J`)
}

// Warning events are logged as warnings: klog's W in the text format,
// "level":"WARN" in the JSON format; Normal ones as info. Each format
// writes one record per line, naming the recorder's line.
func TestWarningEventsAreWarnings(t *testing.T) {
	warning := events.Event{Type: events.Warning, Reason: "Unhealthy", Namespace: "shop", Pod: "web", Container: "app",
		Message: "Liveness probe failed: \x1b[2Jboom\nsecond line"}
	normal := events.Event{Type: events.Normal, Reason: "Started", Namespace: "shop", Pod: "web", Container: "app", Message: "Container started"}

	var text bytes.Buffer
	recorder := events.Log(newLogger(&text, 0).WithValues("component", "agent"))
	recorder.Record(warning)
	recorder.Record(normal)
	lines := strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n")
	require.Len(t, lines, 2, text.String())
	assert.True(t, strings.HasPrefix(lines[0], "W"), lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "I"), lines[1])
	assert.Contains(t, lines[0], `message="Liveness probe failed: \x1b[2Jboom\nsecond line"`)
	assert.Contains(t, lines[0], `component="agent"`)
	for _, l := range lines {
		assert.Contains(t, l, " events.go:", "the recorder's line, not the sink's")
	}

	var js bytes.Buffer
	recorder = events.Log(newJSONLogger(&js, 0).WithValues("component", "agent"))
	recorder.Record(warning)
	recorder.Record(normal)
	lines = strings.Split(strings.TrimSuffix(js.String(), "\n"), "\n")
	require.Len(t, lines, 2, js.String())
	var records []map[string]any
	for _, l := range lines {
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		records = append(records, r)
	}
	assert.Equal(t, "WARN", records[0]["level"])
	assert.Equal(t, "INFO", records[1]["level"])
	assert.Equal(t, "Liveness probe failed: \x1b[2Jboom\nsecond line", records[0]["message"], "JSON escapes it")
	assert.NotContains(t, js.String(), "\x1b")
	assert.Equal(t, "agent", records[0]["component"])
	for _, r := range records {
		source, _ := r["source"].(map[string]any)
		assert.Contains(t, source["file"], "events.go", "the recorder's line: %v", r)
	}
}

// --log-format is checked as it is parsed, on every command that logs.
func TestLogFormatFlag(t *testing.T) {
	_, errOut, err := runCLI(t, "pods", "--log-format", "xml")
	assert.ErrorIs(t, err, errUsage)
	assert.Contains(t, errOut, `invalid argument "xml" for "--log-format" flag: want text or json, not "xml"`)
}
