package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

const gatedManifest = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  readinessGates:
  - conditionType: example.com/lb
  containers:
  - name: app
    image: app
`

// cli runs a command in process, as main does, and returns its output
// and exit code.
func cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logr.Discard()), 20*time.Second)
	defer cancel()
	err := run(ctx, args, &out, &errOut)
	if err != nil {
		code = report(err, &errOut)
	}
	return out.String(), errOut.String(), code
}

// gatedAgent runs the agent against a fake runtime with shop/web, whose
// manifest has a readiness gate, and returns the --server of its unix
// socket.
func gatedAgent(t *testing.T, extra ...string) (server string, logs func() string) {
	t.Helper()
	rt := fakeruntime.NewForTest(t)
	sb := rt.AddSandbox("shop", "web", "u1", fakeruntime.WithIP("10.1.2.3"))
	rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING)
	dir := t.TempDir()
	manifests := filepath.Join(dir, "pods")
	require.NoError(t, os.Mkdir(manifests, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(manifests, "web.yaml"), []byte(gatedManifest), 0o644))
	server = "unix://" + filepath.Join(dir, "api.sock")
	logs = startRunOn(t, rt, append([]string{"--listen", server, "--pod-manifests", manifests, "--relist-period", "100ms"}, extra...)...)
	require.Eventually(t, func() bool {
		_, ok := statusOf(t, server, "shop", "web")
		return ok
	}, 10*time.Second, 20*time.Millisecond, "the agent serves shop/web: %s", logs())
	return server, logs
}

// statusOf is the pod as `status -o json` prints it.
func statusOf(t *testing.T, server, namespace, name string) (api.Pod, bool) {
	t.Helper()
	out, _, code := cli(t, "status", "-o", "json", "--server", server)
	if code != 0 {
		return api.Pod{}, false
	}
	var list api.PodList
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	for _, p := range list.Pods {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return api.Pod{}, false
}

func conditionOf(p api.Pod, t string) (api.Condition, bool) {
	for _, c := range p.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return api.Condition{}, false
}

// `cri-prober gate` against a running agent (its unix socket): a pod with
// a readiness gate is not Ready until its condition is set True, with
// kubelet's reason and message meanwhile; set, unset and list say what
// they did, kubectl's way; each change is an event naming who made it.
func TestGateCommands(t *testing.T) {
	server, _ := gatedAgent(t, "--state-dir", filepath.Join(t.TempDir(), "state"))

	p, _ := statusOf(t, server, "shop", "web")
	assert.False(t, p.Ready, "its gate's condition is not set")
	ready, _ := conditionOf(p, "Ready")
	assert.Equal(t, api.Condition{Type: "Ready", Status: "False", Reason: "ReadinessGatesNotReady",
		Message: `corresponding condition of pod readiness gate "example.com/lb" does not exist.`}, api.Condition{Type: ready.Type, Status: ready.Status, Reason: ready.Reason, Message: ready.Message})
	out, _, code := cli(t, "status", "-o", "wide", "--server", server)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "READINESS GATES")
	assert.Regexp(t, `shop\s+web\s+1/1\s+Running\s+0\s+\S+\s+10\.1\.2\.3\s+\S+\s+0/1\s`, out)

	out, errOut, code := cli(t, "gate", "set", "shop/web", "example.com/lb=True", "--server", server)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "pod shop/web: example.com/lb=True; the pod is ready\n", out)
	assert.Empty(t, errOut)
	p, _ = statusOf(t, server, "shop", "web")
	assert.True(t, p.Ready)
	gate, ok := conditionOf(p, "example.com/lb")
	require.True(t, ok)
	assert.Equal(t, "True", gate.Status)
	assert.Equal(t, "example.com/lb", p.Conditions[0].Type, "before kubelet's conditions, as in kubelet's status")
	out, _, _ = cli(t, "status", "-o", "wide", "--server", server)
	assert.Regexp(t, `shop\s+web\s+1/1\s+Running\s+0\s+\S+\s+10\.1\.2\.3\s+\S+\s+1/1\s`, out)

	out, errOut, code = cli(t, "gate", "set", "-n", "shop", "web", "example.com/lb=true", "--server", server)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "pod shop/web: example.com/lb=True (unchanged); the pod is ready\n", out)

	out, errOut, code = cli(t, "gate", "set", "shop/web", "example.com/other=False", "--server", server)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "pod shop/web: example.com/other=False; the pod is ready\n", out)
	assert.Contains(t, errOut, `Warning: pod shop/web has no readiness gate "example.com/other": the condition is kept and shown, and does not change the pod's readiness`)

	// -o json: the agent's answer, a document per condition (jq reads
	// them), as pause and resume print theirs.
	out, errOut, code = cli(t, "gate", "set", "shop/web", "example.com/lb=True", "example.com/other=False", "-o", "json", "--server", server)
	require.Equal(t, 0, code, errOut)
	dec := json.NewDecoder(strings.NewReader(out))
	for _, want := range []api.GateAnswer{
		{Namespace: "shop", Name: "web", ConditionType: "example.com/lb", Status: "True", Previous: "True", Declared: true, Ready: true, Persistent: true},
		{Namespace: "shop", Name: "web", ConditionType: "example.com/other", Status: "False", Previous: "False", Ready: true, Persistent: true},
	} {
		var got api.GateAnswer
		require.NoError(t, dec.Decode(&got), out)
		got.Warning = ""
		assert.Equal(t, want, got)
	}
	assert.False(t, dec.More(), out)
	assert.Contains(t, errOut, `Warning: pod shop/web has no readiness gate "example.com/other"`, "warnings on stderr still")

	out, _, code = cli(t, "gate", "list", "--server", server)
	require.Equal(t, 0, code)
	assert.Regexp(t, `NAMESPACE\s+POD\s+CONDITION\s+STATUS\s+SINCE\nshop\s+web\s+example.com/lb\s+True\s+\S+\nshop\s+web\s+example.com/other\s+False\s+\S+\n`, out)
	out, _, _ = cli(t, "gate", "list", "-o", "wide", "--server", server)
	assert.Contains(t, out, "u1")
	assert.Regexp(t, `uid \d+ \(pid \d+\) on the unix socket`, out, "who set it")

	out, errOut, code = cli(t, "gate", "unset", "shop/web", "example.com/lb", "--server", server)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "pod shop/web: example.com/lb unset (was True); the pod is not ready\n", out)
	p, _ = statusOf(t, server, "shop", "web")
	assert.False(t, p.Ready)

	out, _, code = cli(t, "events", "-o", "json", "--server", server)
	require.Equal(t, 0, code)
	assert.Regexp(t, `"reason": "ReadinessGateSet",\s+"namespace": "shop",\s+"pod": "web",\s+"message": "Condition \\"example.com/lb\\" set to True by uid \d+ \(pid \d+\) on the unix socket"`, out)
	assert.Contains(t, out, `set to False by uid`)
	assert.Contains(t, out, `; the pod has no readiness gate \"example.com/other\", so its readiness does not change`)
	assert.Regexp(t, `"reason": "ReadinessGateUnset",\s+"namespace": "shop",\s+"pod": "web",\s+"message": "Condition \\"example.com/lb\\" \(True\) unset by uid`, out)
}

// Mistakes get errors that say what to do, with kubectl's exit codes: 2
// for a bad command line (before the agent is asked), 1 for the agent's
// no.
func TestGateCommandErrors(t *testing.T) {
	server, _ := gatedAgent(t)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "an unknown pod", args: []string{"gate", "set", "shop/nope", "example.com/lb=True"}, code: 1,
			want: "agent at " + server + " answered 404 Not Found: pod not found: no pod shop/nope on this node (cri-prober status lists them)"},
		{name: "kubelet's own condition", args: []string{"gate", "set", "shop/web", "Ready=True"}, code: 2, want: `condition "Ready" is kubelet's own`},
		{name: "no status", args: []string{"gate", "set", "shop/web", "example.com/lb"}, code: 2, want: `"example.com/lb": want CONDITION=True or CONDITION=False`},
		{name: "Unknown", args: []string{"gate", "set", "shop/web", "example.com/lb=Unknown"}, code: 2, want: `status "Unknown": want True or False`},
		{name: "no condition", args: []string{"gate", "set", "shop/web"}, code: 2, want: "want POD CONDITION=True|False..., got 1 argument(s)"},
		{name: "a status to unset", args: []string{"gate", "unset", "shop/web", "example.com/lb=True"}, code: 2, want: "want a condition type alone"},
		{name: "two namespaces", args: []string{"gate", "set", "-n", "other", "shop/web", "example.com/lb=True"}, code: 2, want: `pod "shop/web" is in namespace "shop" but -n says "other"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := cli(t, append(tt.args, "--server", server)...)
			assert.Equal(t, tt.code, code, out+errOut)
			assert.Contains(t, errOut, tt.want)
		})
	}
	p, _ := statusOf(t, server, "shop", "web")
	_, set := conditionOf(p, "example.com/lb")
	assert.False(t, set, "nothing set")
}

// Without --state-dir the agent keeps the conditions in memory only, and
// says so.
func TestGateWithoutStateDirWarns(t *testing.T) {
	server, _ := gatedAgent(t)
	_, errOut, code := cli(t, "gate", "set", "shop/web", "example.com/lb=True", "--server", server)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "Warning: the agent runs without --state-dir: it forgets this condition when it restarts")
	out, _, _ := cli(t, "gate", "list", "-o", "json", "--server", server)
	assert.Contains(t, out, `"persistent": false`)
}

// gate and its subcommands have help with examples, are listed by the
// top-level help, and a mistyped subcommand gets kubectl's suggestion.
func TestGateHelp(t *testing.T) {
	for _, args := range [][]string{{"gate"}, {"gate", "set"}, {"gate", "unset"}, {"gate", "list"}} {
		out, _, code := cli(t, append(args, "--help")...)
		require.Equal(t, 0, code)
		assert.Contains(t, out, "Usage:\n  cri-prober "+strings.Join(args, " "))
		assert.Contains(t, out, "Examples:")
	}
	out, _, _ := cli(t, "--help")
	assert.Contains(t, out, "\n  gate ")
	_, errOut, code := cli(t, "gate", "sett", "shop/web", "example.com/lb=True")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "Did you mean this?\n\tset")
}
