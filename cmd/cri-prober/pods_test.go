package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/spf13/pflag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/results"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = run(context.Background(), args, &out, &errb)
	report(err, &errb) // what main prints
	return out.String(), errb.String(), err
}

func TestPodsTable(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	web := rt.AddSandbox("shop", "web", "u1", fakeruntime.WithIP("10.1.2.3"))
	rt.AddContainer(web, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAttempt(2))
	job := rt.AddContainer(web, "job", runtimeapi.ContainerState_CONTAINER_RUNNING)
	require.NoError(t, rt.SetContainerState(job, runtimeapi.ContainerState_CONTAINER_EXITED, 3))
	rt.AddSandbox("other", "empty", "u2", fakeruntime.WithIP(""))

	out, _, err := runCLI(t, "pods", "--runtime-endpoint", rt.Endpoint())
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	assert.Equal(t, []string{"NAMESPACE", "POD", "IP", "CONTAINER", "ID", "ATTEMPT", "STATE", "STARTED", "EXIT"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"other", "empty", "-", "<none>"}, strings.Fields(lines[1])[:4], "a pod without containers still shows")
	assert.Equal(t, []string{"shop", "web", "10.1.2.3", "app"}, strings.Fields(lines[2])[:4])
	assert.Contains(t, lines[2], " 2 ", "attempt")
	assert.Contains(t, lines[2], "Running")
	assert.Contains(t, lines[3], "Exited")
	assert.Contains(t, lines[3], "3 (Error)")
	assert.Len(t, strings.Fields(lines[2])[4], 13, "short IDs as crictl prints them")

	out, _, err = runCLI(t, "pods", "--runtime-endpoint", rt.Endpoint(), "--namespace", "shop")
	require.NoError(t, err)
	assert.NotContains(t, out, "empty")
	assert.Contains(t, out, "web")
}

func TestPodsJSON(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	sb := rt.AddSandbox("shop", "web", "u1", fakeruntime.WithIP("10.1.2.3"))
	rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt.AddSandbox("other", "empty", "u2")

	out, _, err := runCLI(t, "pods", "--runtime-endpoint", rt.Endpoint(), "-o", "json", "--namespace", "shop")
	require.NoError(t, err)
	var got struct {
		Pods []struct {
			Namespace, Name, UID string
			IPs                  []string
			Containers           []struct {
				Name, State string
				StartedAt   time.Time
			}
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Len(t, got.Pods, 1)
	p := got.Pods[0]
	assert.Equal(t, "web", p.Name)
	assert.Equal(t, "u1", p.UID)
	assert.Equal(t, []string{"10.1.2.3"}, p.IPs)
	require.Len(t, p.Containers, 1)
	assert.Equal(t, "Running", p.Containers[0].State)
	assert.False(t, p.Containers[0].StartedAt.IsZero())
}

func TestEndpointPrecedence(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	t.Setenv(cri.EndpointEnv, rt.Endpoint())
	_, _, err := runCLI(t, "pods")
	assert.NoError(t, err, "the environment variable is used when the flag is not given")

	_, _, err = runCLI(t, "pods", "--runtime-endpoint", "unix:///nonexistent/cri.sock")
	assert.ErrorContains(t, err, "/nonexistent/cri.sock", "the flag wins over the environment")
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantUsage  bool
		wantStderr string
		wantStdout string
	}{
		{name: "no command: help", args: nil, wantStdout: "Running pods and the agent:"},
		{name: "unknown command", args: []string{"frobnicate"}, wantUsage: true, wantStderr: `error: unknown command "frobnicate" for "cri-prober"`},
		{name: "misspelt command", args: []string{"stauts"}, wantUsage: true, wantStderr: "Did you mean this?\n\tstatus"},
		{name: "bad output format", args: []string{"pods", "-o", "xml"}, wantUsage: true, wantStderr: `-o "xml": want one of table, wide, json, yaml`},
		{name: "unknown flag", args: []string{"pods", "--bogus"}, wantUsage: true, wantStderr: "unknown flag: --bogus\nSee 'cri-prober pods --help' for usage."},
		{name: "stray argument", args: []string{"pods", "extra"}, wantUsage: true, wantStderr: "unexpected argument(s): extra"},
		{name: "flags after arguments are flags", args: []string{"why", "shop/web", "--all", "-s", "unix:///nonexistent.sock"}, wantStderr: "cannot reach the agent"},
		{name: "help is not an error", args: []string{"pods", "--help"}, wantStdout: "Examples:"},
		{name: "top-level help", args: []string{"help"}, wantStdout: "Asking a running agent:"},
		{name: "version", args: []string{"--version"}, wantStdout: "cri-prober "},
		{name: "namespace twice", args: []string{"history", "-n", "a", "b/web"}, wantUsage: true, wantStderr: `pod "b/web" is in namespace "b" but -n says "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := runCLI(t, tt.args...)
			switch {
			case tt.wantUsage:
				assert.True(t, errors.Is(err, errUsage), "err = %v", err)
			case tt.wantStderr == "":
				assert.NoError(t, err)
			}
			assert.Contains(t, errOut, tt.wantStderr)
			assert.Contains(t, out, tt.wantStdout)
		})
	}
}

func TestFormatEvent(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	pod := &cri.Sandbox{ID: "0123456789abcdef", Namespace: "ns", Name: "web", IPs: []string{"10.0.0.1"}}
	ctr := &cri.Container{ID: "fedcba9876543210", Name: "app", Attempt: 1, State: cri.StateExited, ExitCode: 137, Reason: "Error"}
	assert.Equal(t, "03:04:05.600  SandboxAdded     ns/web id=0123456789abc ip=10.0.0.1",
		formatEvent(cri.Event{Type: cri.SandboxAdded, Sandbox: pod}, "", now))
	assert.Equal(t, "03:04:05.600  ContainerExited  ns/web container=app id=fedcba9876543 attempt=1 exit=137 (Error)",
		formatEvent(cri.Event{Type: cri.ContainerExited, Sandbox: pod, Container: ctr}, "", now))
}

func TestAgo(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s ago"}, {42 * time.Second, "42s ago"}, {5 * time.Minute, "5m ago"},
		{3 * time.Hour, "3h ago"}, {72 * time.Hour, "3d ago"},
	} {
		assert.Equal(t, tt.want, ago(now.Add(-tt.d), now))
	}
	assert.Equal(t, "-", ago(time.Time{}, now))
}

func TestEventsAddress(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	c, err := cri.Dial(context.Background(), rt.Endpoint())
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, "", eventsAddress("", c), "the fake runtime is not containerd: poll only")
	assert.Equal(t, "", eventsAddress("none", c))
	assert.Equal(t, "/run/x.sock", eventsAddress("/run/x.sock", c))
}

func TestPrintStatus(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	probed := now.Add(-2 * time.Second)
	until := now.Add(8 * time.Second)
	pods := []api.Pod{
		{Namespace: "shop", Name: "web", CreatedAt: now.Add(-5 * time.Minute), Containers: []api.Container{
			{Name: "app", State: "Running", Ready: false, RestartCount: 3, Probes: map[string]api.Probe{
				"liveness":  {Result: "success", LastProbeTime: &probed, Consecutive: 9, Threshold: 1},
				"readiness": {Result: "failure", LastProbeTime: &probed, Consecutive: 1, Threshold: 3, Output: "HTTP probe failed with statuscode: 503"},
				"startup":   {Result: "unknown"},
			}},
			{Name: "worker", State: "CrashLoopBackOff", RestartCount: 2, WaitingUntil: &until, Probes: map[string]api.Probe{}},
		}},
		{Namespace: "shop", Name: "longer-pod-name", CreatedAt: now.Add(-50 * time.Hour), Problems: []string{"pods.yaml:1: pod shop/longer-pod-name: bad"},
			Containers: []api.Container{{Name: "c", State: "Running", Ready: true, Probes: map[string]api.Probe{}}}},
	}
	var out strings.Builder
	printStatus(&out, pods, now, false, true)
	want := `NAMESPACE  POD              READY  STATUS              RESTARTS  AGE
shop       web              0/2    CrashLoopBackOff    5         5m0s
    app: not ready, Running, restarts 3 — liveness success 2s ago · readiness failure (1/3) 2s ago: HTTP probe failed with statuscode: 503 · startup not run yet
    worker: not ready, CrashLoopBackOff, restarts 2 — back-off until ` + until.Local().Format("15:04:05") + `
shop       longer-pod-name  1/1    InvalidProbeConfig  0         2d2h
    c: ready, Running, restarts 0 — no probes
    ! pods.yaml:1: pod shop/longer-pod-name: bad
`
	assert.Equal(t, want, out.String())
}

func TestValidateCommand(t *testing.T) {
	out, _, err := runCLI(t, "validate", "../../pkg/spec/testdata/good/pods.yaml")
	require.NoError(t, err)
	assert.Equal(t, "ok: 2 valid pod(s)\n", out)

	out, _, err = runCLI(t, "validate", "../../pkg/spec/testdata/named-port-missing.yaml")
	assert.ErrorIs(t, err, errProblemsFound, "an inert probe is said loudly")
	assert.Equal(t, `warning: ../../pkg/spec/testdata/named-port-missing.yaml:13: pod shop/named-port-missing: container app: spec.containers[0].livenessProbe.httpGet.port: Invalid value: "http": no port named "http" among the container's ports: this probe errors at every run and never changes its result, as under kubelet; declare the port or use its number`+"\n0 problem(s), 1 warning(s); 1 valid pod(s)\n", out)

	// A directory as the agent reads it: a copy, the test's own (the
	// checkout may be another user's, which the agent refuses).
	good := t.TempDir()
	files, err := filepath.Glob("../../pkg/spec/testdata/good/*")
	require.NoError(t, err)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(good, filepath.Base(f)), data, 0o644))
	}
	out, _, err = runCLI(t, "validate", "../../pkg/spec/testdata/bad/negative-period.yaml", good)
	assert.ErrorIs(t, err, errProblemsFound, "exit code 1")
	assert.Equal(t, "../../pkg/spec/testdata/bad/negative-period.yaml:12: pod shop/negative-period: container app: spec.containers[0].livenessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0\n"+
		"warning: "+filepath.Join(good, "readiness-gates.yaml")+":5: pod shop/readiness-gates: spec.readinessGates: Invalid value: \"example.com/lb\": nothing sets pod conditions without an API server, so the pod is not Ready until each gate's condition is set True with cri-prober gate set (as under kubelet, where a controller sets it); its containers run, are probed and restarted meanwhile\n"+
		"1 problem(s), 1 warning(s); 5 valid pod(s)\n", out)

	out, _, err = runCLI(t, "validate", "/nonexistent.yaml")
	assert.ErrorIs(t, err, errProblemsFound)
	assert.Contains(t, out, "/nonexistent.yaml: cannot read it: no such file or directory")

	_, errOut, err := runCLI(t, "validate")
	assert.ErrorIs(t, err, errUsage)
	assert.Contains(t, errOut, "validate needs at least one file or directory")
}

func TestExplainCommand(t *testing.T) {
	out, _, err := runCLI(t, "explain", "-f", "../../examples/demo/pods.yaml")
	require.NoError(t, err)
	for _, want := range []string{
		"pod demo/web (../../examples/demo/pods.yaml:8): restartPolicy Always, terminationGracePeriodSeconds 5",
		"pod demo/slow (../../examples/demo/pods.yaml:59)",
		"gives up:            29s – 31s after the container starts, if it never passes",
		"liveness: httpGet http /healthz every 1s, timeout 1s, success 1, failure 2, initial delay 0s",
		"failure detected:    1s – 3s after the app breaks",
		"restarted:           1s – 8s (grace 5s",
	} {
		assert.Contains(t, out, want)
	}
	out, _, err = runCLI(t, "explain", "../../pkg/spec/testdata/bad/two-handlers.yaml")
	assert.ErrorIs(t, err, errProblemsFound)
	assert.Contains(t, out, "invalid: ")
}

func TestConfigFile(t *testing.T) {
	newFS := func() (*pflag.FlagSet, *string, *time.Duration, *bool) {
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		listen := fs.String("listen", "127.0.0.1:9440", "")
		period := fs.Duration("relist-period", time.Second, "")
		watch := fs.Bool("watch", false, "")
		fs.String("config", "", "")
		return fs, listen, period, watch
	}
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}

	fs, listen, period, watch := newFS()
	require.NoError(t, fs.Parse([]string{"--listen", "0.0.0.0:1"}))
	require.NoError(t, applyConfig(fs, write("listen: 127.0.0.1:2\nrelist-period: 2s\nwatch: true\n")))
	assert.Equal(t, "0.0.0.0:1", *listen, "the command line wins")
	assert.Equal(t, 2*time.Second, *period, "the file beats the default")
	assert.True(t, *watch)

	fs, _, _, _ = newFS()
	err := applyConfig(fs, write("listne: x\n"))
	assert.ErrorContains(t, err, `unknown key "listne"; the keys are run's flags: listen, relist-period, watch`)
	fs, _, _, _ = newFS()
	assert.ErrorContains(t, applyConfig(fs, write("relist-period: soon\n")), "relist-period: invalid value")
	fs, _, _, _ = newFS()
	assert.ErrorContains(t, applyConfig(fs, write("listen: [a, b]\n")), "listen: want a single value")
	fs, _, _, _ = newFS()
	assert.ErrorContains(t, applyConfig(fs, "/nonexistent.yaml"), "config file: open /nonexistent.yaml")
}

// The example config of docs/deployment.md names run's flags only.
func TestDeployConfigIsValid(t *testing.T) {
	var o runOptions
	fs := newRunCommand(&o).Flags()
	require.NoError(t, fs.Parse(nil))
	require.NoError(t, applyConfig(fs, "../../deploy/config.yaml"))
	assert.Equal(t, "/etc/cri-prober/pods", o.manifests)
	assert.Equal(t, "recreate", o.restartMode)
	assert.Equal(t, "127.0.0.1:9440", o.listen)
}

// Every command's --help exits 0 with its usage and examples.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, cmd := range []string{"run", "status", "events", "history", "why", "wait", "probe", "validate", "explain", "pods", "logs"} {
		t.Run(cmd, func(t *testing.T) {
			out, _, err := runCLI(t, cmd, "--help")
			require.NoError(t, err)
			assert.Contains(t, out, "Usage:\n  cri-prober "+cmd)
			assert.Contains(t, out, "Examples:")
			assert.Contains(t, out, "Flags:")
			// `help CMD` says the same, as kubectl's and crictl's.
			viaHelp, _, err := runCLI(t, "help", cmd)
			require.NoError(t, err)
			assert.Equal(t, out, viaHelp)
		})
	}
	out, _, err := runCLI(t, "--help")
	require.NoError(t, err)
	for _, cmd := range []string{"run", "status", "events", "history", "why", "wait", "probe", "validate", "explain", "pods", "logs", "version"} {
		assert.Contains(t, out, "\n  "+cmd+" ", "the top-level help lists %s", cmd)
	}
}

// Probe output comes from containers: what the CLI prints of it must not
// drive the operator's terminal.
func TestTerminalSafe(t *testing.T) {
	assert.Equal(t, `ok \x1b]0;pwned\x07 \x1b[2J done`, terminalSafe("ok \x1b]0;pwned\a \x1b[2J done"))
	assert.Equal(t, "two lines  tab", terminalSafe("two\rlines\n\ttab"))
	assert.Equal(t, `bad \xfffd utf-8, ünïcode kept`, terminalSafe("bad \xff utf-8, ünïcode kept"))
	var out strings.Builder
	printEvent(&out, events.Event{Time: time.Unix(0, 0), Type: "Warning", Reason: "Unhealthy", Namespace: "ns", Pod: "p",
		Message: "Readiness probe failed: \x1b[31mred\x1b[0m\nsecond line", Count: 2, Threshold: 3}, false)
	assert.Contains(t, out.String(), "\t2/3\t", "the count beside kubelet's message")
	assert.Contains(t, out.String(), `Readiness probe failed: \x1b[31mred\x1b[0m second line`)
}

// A failure below its threshold (run --probe-failure-events=threshold):
// its own reason and type, the count in the same column.
func TestPrintIgnoredProbeFailure(t *testing.T) {
	var out strings.Builder
	printEvent(&out, events.Event{Time: time.Unix(0, 0), Type: events.Normal, Reason: "ProbeFailureIgnored", Namespace: "ns", Pod: "p", Container: "app",
		Message: "Liveness probe failed (1/3, will be ignored): boom", Count: 1, Threshold: 3}, false)
	assert.Equal(t, time.Unix(0, 0).Local().Format("15:04:05")+"\tNormal\tProbeFailureIgnored\tns/p/app\t1/3\tLiveness probe failed (1/3, will be ignored): boom\n", out.String())
}

func TestPrintHistory(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.Local)
	run := func(sec int, result string, n, of int, changed bool, out string) api.Run {
		return api.Run{Time: t0.Add(time.Duration(sec) * time.Second), DurationMs: 2.4, Result: result, Consecutive: n, Threshold: of, Changed: changed, Output: out}
	}
	h := api.History{Namespace: "shop", Name: "web", Probes: []api.ProbeHistory{{
		Container: "app", Type: "liveness",
		Recent:   []api.Run{run(10, "success", 1, 1, true, ""), run(11, "success", 2, 1, false, "")},
		Failures: []api.Run{run(1, "failure", 1, 3, false, "HTTP probe failed with statuscode: 500"), run(2, "failure", 2, 3, false, "HTTP probe failed with statuscode: 500")},
	}}}
	var out strings.Builder
	printHistory(&out, h, false)
	assert.Equal(t, `CONTAINER  PROBE     TIME                RESULT   COUNT  TOOK  OUTPUT
app        liveness  10:00:10.000        success  1/1*   2ms   
app        liveness  10:00:11.000        success  2/1    2ms   
app        liveness  (earlier failures)                        
app        liveness  10:00:01.000        failure  1/3    2ms   HTTP probe failed with statuscode: 500
app        liveness  10:00:02.000        failure  2/3    2ms   HTTP probe failed with statuscode: 500
`, out.String())
	out.Reset()
	printHistory(&out, api.History{Namespace: "shop", Name: "db"}, false)
	assert.Equal(t, "pod shop/db: no probe has run\n", out.String())
}

func TestPrintWhy(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.Local)
	var out strings.Builder
	printWhy(&out, api.Restart{Time: t0.Add(3 * time.Second), Namespace: "shop", Pod: "web", Container: "app", ContainerID: "0123456789abcdef0123",
		Cause: "liveness", Failures: []api.RestartFailure{
			{Time: t0.Add(time.Second), Output: "HTTP probe failed with statuscode: 500", Consecutive: 1, Threshold: 2},
			{Time: t0.Add(2 * time.Second), Output: "HTTP probe failed with statuscode: 500", Consecutive: 2, Threshold: 2},
		}, ExitCode: 137, ExitReason: "Error", GracePeriodSeconds: 30, Action: ledger.ActionRestarted, ReplacementID: "fedcba9876543210fedc", Attempt: 1}, false)
	printWhy(&out, api.Restart{Time: t0.Add(time.Minute), Namespace: "shop", Pod: "web", Container: "app", ContainerID: "fedcba9876543210fedc",
		Cause: "exit", ExitCode: 3, ExitReason: "Error", Action: ledger.ActionRestarted, ReplacementID: "aaaabbbbccccdddd", Attempt: 2, BackOffSeconds: 10.26}, false)
	assert.Equal(t, `shop/web app: restarted 2026-11-21 10:00:03 as attempt 1
  why: its liveness probe failed 2 time(s) in a row (failureThreshold 2):
    10:00:01.000  1/2  HTTP probe failed with statuscode: 500
    10:00:02.000  2/2  HTTP probe failed with statuscode: 500
  killed with a 30 s grace period; it ended with code 137 (Error)
  replaced 0123456789abc by fedcba9876543 after 0s of back-off
shop/web app: restarted 2026-11-21 10:01:00 as attempt 2
  why: it exited with code 3 (Error)
  replaced fedcba9876543 by aaaabbbbccccd after 10.3s of back-off
`, out.String())
}

// Init containers, as kubectl shows them: not counted in READY, Init:N/M
// while the pod initializes, completed ones shown as such.
func TestPrintStatusWithInitContainers(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	pods := []api.Pod{
		{Namespace: "shop", Name: "starting", Phase: "Pending", CreatedAt: now, Containers: []api.Container{
			{Name: "setup", Kind: "init", State: "Exited", Reason: "Completed", Ready: true},
			{Name: "migrate", Kind: "init", State: "Running"},
			{Name: "app", State: "Waiting", Probes: map[string]api.Probe{}},
		}},
		// kubelet's status: the sidecar stopped with the pod, which is
		// initialized (PodCompleted), so the regular containers say.
		{Namespace: "shop", Name: "job", Phase: "Succeeded", CreatedAt: now,
			Conditions: []api.Condition{{Type: "Initialized", Status: "True", Reason: "PodCompleted"}, {Type: "Ready", Status: "False", Reason: "PodCompleted"}},
			Containers: []api.Container{
				{Name: "proxy", Kind: "sidecar", State: "Exited", Reason: "Error", ExitCode: 137, Probes: map[string]api.Probe{},
					Status: api.ContainerStatus{State: api.ContainerState{Terminated: &api.StateTerminated{ExitCode: 137, Reason: "Error"}}}},
				{Name: "main", State: "Exited", Reason: "Completed", Probes: map[string]api.Probe{},
					Status: api.ContainerStatus{State: api.ContainerState{Terminated: &api.StateTerminated{Reason: "Completed"}}}},
			}},
	}
	var out strings.Builder
	printStatus(&out, pods, now, false, true)
	want := `NAMESPACE  POD       READY  STATUS     RESTARTS  AGE
shop       starting  0/1    Init:1/2   0         0s
    setup (init): completed, restarts 0
    migrate (init): running, restarts 0
    app: not ready, Waiting, restarts 0 — no probes
shop       job       0/2    Completed  0         0s
    proxy (sidecar): not ready, Error (exit code 137), restarts 0 — no probes
    main: not ready, Completed, restarts 0 — no probes
`
	assert.Equal(t, want, out.String())
}

// status -o wide says what kubectl describe does: the pod's conditions
// and why it failed, why a container waits, how its last instance ended
// with its termination message's first line; what a workload wrote made
// safe for the terminal and cut to a line.
func TestPrintStatusWide(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	finished := now.Add(-2 * time.Minute)
	hostile := "disk full\x1b[2J\u202e" + strings.Repeat("x", 300) + "\nsecond line"
	pods := []api.Pod{{Namespace: "shop", Name: "web", Phase: "Running", IP: "10.0.0.5", SandboxID: "0123456789abcdef", Source: "pods.yaml:1", CreatedAt: now.Add(-time.Hour),
		ReadinessGates: []string{"example.com/lb", "example.com/warm"},
		Conditions:     []api.Condition{{Type: "example.com/lb", Status: "True"}, {Type: "Initialized", Status: "True"}, {Type: "Ready", Status: "False", Reason: "ContainersNotReady", Message: "containers with unready status: [app]"}},
		Containers: []api.Container{{Name: "app", RestartCount: 4, Probes: map[string]api.Probe{}, WaitingUntil: &finished,
			Status: api.ContainerStatus{State: api.ContainerState{Waiting: &api.StateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container=app pod=web_shop(u)"}},
				LastState: api.ContainerState{Terminated: &api.StateTerminated{ExitCode: 1, Reason: "Error", Message: hostile, FinishedAt: &finished}}}}}},
		{Namespace: "shop", Name: "batch", Phase: "Failed", Reason: "DeadlineExceeded", Message: "Pod was active on the node longer than the specified deadline", CreatedAt: now,
			Containers: []api.Container{{Name: "run", Probes: map[string]api.Probe{},
				Status: api.ContainerStatus{State: api.ContainerState{Terminated: &api.StateTerminated{ExitCode: 137, Reason: "Error", FinishedAt: &now}}}}}}}
	var out strings.Builder
	printStatus(&out, pods, now, true, true)
	want := `NAMESPACE  POD    READY  STATUS            RESTARTS      AGE   IP        SANDBOX        READINESS GATES  SPEC
shop       web    0/1    CrashLoopBackOff  4 (2m0s ago)  1h0m  10.0.0.5  0123456789abc  1/2              pods.yaml:1
    conditions: example.com/lb=True, Initialized=True, Ready=False (ContainersNotReady: containers with unready status: [app])
    app: not ready, CrashLoopBackOff, restarts 4 — back-off until ` + finished.Local().Format("15:04:05") + `
      waiting: back-off 40s restarting failed container=app pod=web_shop(u)
      last state: Error (exit code 1), finished 2m0s ago: disk full\x1b[2J\u202e` + strings.Repeat("x", 144) + `… (156 more bytes cut)
shop       batch  0/1    Error             0             0s    -                        <none>           -
    reason: DeadlineExceeded: Pod was active on the node longer than the specified deadline
    run: not ready, Error (exit code 137), restarts 0 — no probes
      terminated: Error (exit code 137), finished 0s ago
`
	assert.Equal(t, want, out.String())
}

// `pods` and `status` show a dual-stack pod's IP by one rule (podip.Primary,
// kubelet's sortPodIPs): the address of the node's family, whatever order
// the runtime lists them in. The table's IP column is compared with what
// the API serves to status (pods.ReportPod over the resolver's view).
func TestPodsAndStatusAgreeOnADualStackPodIP(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	web := rt.AddSandbox("shop", "web", "u1", fakeruntime.WithIPs("fd00::5", "10.0.0.5"))
	rt.AddContainer(web, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	client, err := cri.Dial(context.Background(), rt.Endpoint())
	require.NoError(t, err)
	defer client.Close()
	poller, err := cri.NewPoller(client)
	require.NoError(t, err)
	snap, err := poller.Relist(context.Background())
	require.NoError(t, err)

	for _, tt := range []struct{ nodeIP, want string }{
		{"", "10.0.0.5"}, // run's default: the IPv4 default route's address
		{"192.168.1.2", "10.0.0.5"},
		{"2001:db8::1", "fd00::5"},
	} {
		t.Run("node "+tt.nodeIP, func(t *testing.T) {
			args := []string{"pods", "--runtime-endpoint", rt.Endpoint()}
			if tt.nodeIP != "" {
				args = append(args, "--host-ip", tt.nodeIP)
			}
			out, _, err := runCLI(t, args...)
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.Len(t, lines, 2, out)
			table := strings.Fields(lines[1])[2]

			view := pods.Resolve(snap, pods.Inputs{HostIP: tt.nodeIP})
			require.Len(t, view.Pods(), 1)
			status := pods.ReportPod(view.Pods()[0], pods.PodStatus{}, results.NewStore(), pods.GateSet{}).IP

			assert.Equal(t, tt.want, table, "pods")
			assert.Equal(t, tt.want, status, "status")
		})
	}

	_, _, err = runCLI(t, "pods", "--runtime-endpoint", rt.Endpoint(), "--host-ip", "node-1")
	assert.ErrorIs(t, err, errUsage, "a host IP that is not an address is refused")
}
