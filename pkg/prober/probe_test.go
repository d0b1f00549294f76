package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cri-prober/cri-prober/pkg/bounded"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/exec"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/probe"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// scriptedExec answers exec probes from a list, one entry per call.
type scriptedExec struct {
	answers []execAnswer
	calls   int
	lastCmd []string
}

type execAnswer struct {
	result exec.Result
	err    error
}

func (s *scriptedExec) Run(_ context.Context, _, _ string, cmd []string, _ time.Duration) (exec.Result, error) {
	s.lastCmd = cmd
	a := s.answers[min(s.calls, len(s.answers)-1)]
	s.calls++
	return a.result, a.err
}

func execProbe(cmd ...string) *corev1.Probe {
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}}
	spec.DefaultProbe(p)
	return p
}

// The exec rows of kubelet's TestProbe, and its retry rule.
func TestDispatchExec(t *testing.T) {
	errBoom := errors.New("container not running")
	tests := []struct {
		name      string
		answers   []execAnswer
		want      outcome
		wantCalls int
	}{
		{"exit 0: what it printed is not kept (kubelet's)", []execAnswer{{result: exec.Result{Output: "ok"}}}, outcome{result: results.Success, raw: results.OutcomeSuccess}, 1},
		{"non-zero exit", []execAnswer{{result: exec.Result{ExitCode: 1, Output: "bad"}}}, outcome{result: results.Failure, raw: results.OutcomeFailure, output: "bad", reason: ReasonExecExitCode}, 1},
		{"timeout is a failure", []execAnswer{{result: exec.Result{TimedOut: true, Output: `command "x" timed out`}}}, outcome{result: results.Failure, raw: results.OutcomeFailure, output: `command "x" timed out`, reason: ReasonTimeout}, 1},
		{"error, then success: retried", []execAnswer{{err: errBoom}, {err: errBoom}, {result: exec.Result{}}}, outcome{result: results.Success, raw: results.OutcomeSuccess}, 3},
		{"three errors: thrown away", []execAnswer{{err: errBoom}}, outcome{result: results.Failure, raw: results.OutcomeUnknown, reason: ReasonRuntimeError, err: errBoom}, 3},
		{"a failure is never retried", []execAnswer{{result: exec.Result{ExitCode: 2}}, {result: exec.Result{}}}, outcome{result: results.Failure, raw: results.OutcomeFailure, reason: ReasonExecExitCode}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runner := &scriptedExec{answers: tt.answers}
			d := newDispatcher(runner, probe.NewDialer(), false)
			got := d.probe(context.Background(), execProbe("x"), Target{ContainerID: "c", Container: &spec.Container{}})
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantCalls, runner.calls)
		})
	}
}

// What could not run is classified by its cause (the agent's own exhaustion
// is never the container's), and the workload's text is bounded before
// anything keeps it.
func TestDispatchClassifiesAndBounds(t *testing.T) {
	huge := strings.Repeat("x", 5<<20)
	resourceErr := fmt.Errorf("dial tcp 10.0.0.5:80: %w: %w", probe.ErrAgentResource, syscall.EMFILE)
	replyErr := fmt.Errorf("exec in container c: %w", cri.ErrExecReplyTooLarge)
	tests := []struct {
		name       string
		answer     execAnswer
		wantRaw    results.Outcome
		wantReason string
		wantCause  string
	}{
		{"the agent out of resources", execAnswer{err: resourceErr}, results.OutcomeUnknown, ReasonAgentResources, "EMFILE"},
		{"an exec reply over the limit", execAnswer{err: replyErr}, results.OutcomeUnknown, ReasonExecReplyTooLarge, ""},
		{"a huge error text", execAnswer{err: errors.New(huge)}, results.OutcomeUnknown, ReasonRuntimeError, ""},
		{"a huge output", execAnswer{result: exec.Result{ExitCode: 1, Output: huge}}, results.OutcomeFailure, ReasonExecExitCode, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDispatcher(&scriptedExec{answers: []execAnswer{tt.answer}}, probe.NewDialer(), false)
			got := d.probe(context.Background(), execProbe("x"), Target{ContainerID: "c", Container: &spec.Container{}})
			assert.Equal(t, tt.wantRaw, got.raw)
			assert.Equal(t, tt.wantReason, got.reason)
			assert.Equal(t, tt.wantCause, got.resourceCause)
			assert.LessOrEqual(t, len(got.output), bounded.Output+64, "output bounded")
			if got.err != nil {
				assert.LessOrEqual(t, len(got.err.Error()), bounded.Message+64, "error text bounded")
			}
		})
	}
}

func TestDispatchExpandsExecCommand(t *testing.T) {
	runner := &scriptedExec{answers: []execAnswer{{}}}
	d := newDispatcher(runner, probe.NewDialer(), false)
	d.probe(context.Background(), execProbe("some", "$(A)", "$(B)"), Target{Container: &spec.Container{Env: []corev1.EnvVar{{Name: "A", Value: "script"}}}})
	assert.Equal(t, []string{"some", "script", "$(B)"}, runner.lastCmd)
}

func TestDispatchNetworkProbes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte("fine"))
		case "/moved":
			http.Redirect(w, r, "http://0.0.0.0/", http.StatusFound)
		case "/slow":
			<-r.Context().Done() // past the probe's 1 s timeout
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()

	container := &spec.Container{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	httpGet := func(path string, p intstr.IntOrString) *corev1.Probe {
		pr := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: p}}}
		spec.DefaultProbe(pr)
		return pr
	}
	tcp := func(p int) *corev1.Probe {
		pr := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(p)}}}
		spec.DefaultProbe(pr)
		return pr
	}
	tests := []struct {
		name       string
		probe      *corev1.Probe
		podIP      string
		wantResult results.Result
		wantRaw    results.Outcome
		wantErr    string
		wantReason string
	}{
		{"http success by named port", httpGet("/ok", intstr.FromString("http")), "127.0.0.1", results.Success, results.OutcomeSuccess, "", ""},
		{"http failure", httpGet("/broken", intstr.FromInt(port)), "127.0.0.1", results.Failure, results.OutcomeFailure, "", ReasonHTTPStatus},
		{"http refused", httpGet("/ok", intstr.FromInt(closedPort)), "127.0.0.1", results.Failure, results.OutcomeFailure, "", ReasonConnectionRefused},
		{"http timeout", httpGet("/slow", intstr.FromInt(port)), "127.0.0.1", results.Failure, results.OutcomeFailure, "", ReasonTimeout},
		{"http warning counts as success", httpGet("/moved", intstr.FromInt(port)), "127.0.0.1", results.Success, results.OutcomeWarning, "", ""},
		{"named port not found is an error", httpGet("/ok", intstr.FromString("nope")), "127.0.0.1", results.Failure, results.OutcomeUnknown, `strconv.Atoi: parsing "nope": invalid syntax`, ReasonRuntimeError},
		{"no pod IP is an error", httpGet("/ok", intstr.FromInt(port)), "", results.Failure, results.OutcomeUnknown, "the pod has no IP address yet", ReasonRuntimeError},
		{"tcp success", tcp(port), "127.0.0.1", results.Success, results.OutcomeSuccess, "", ""},
		{"tcp refused", tcp(closedPort), "127.0.0.1", results.Failure, results.OutcomeFailure, "", ReasonConnectionRefused},
		{"no handler", &corev1.Probe{TimeoutSeconds: 1}, "127.0.0.1", results.Failure, results.OutcomeUnknown, "missing probe handler", ReasonRuntimeError},
	}
	d := newDispatcher(&scriptedExec{answers: []execAnswer{{}}}, probe.NewDialer(), false)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := d.probe(context.Background(), tt.probe, Target{Host: tt.podIP, Container: container})
			assert.Equal(t, tt.wantResult, got.result)
			assert.Equal(t, tt.wantRaw, got.raw)
			assert.Equal(t, tt.wantReason, got.reason, got.output)
			if tt.wantErr != "" {
				assert.EqualError(t, got.err, tt.wantErr)
			} else {
				assert.NoError(t, got.err)
			}
		})
	}
}

// Credentials in probe headers never reach the output (events, logs, API),
// even from a target that echoes them in a body the probe reports.
func TestDispatchRedactsCredentialHeaders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://192.0.2.1/") // another host: a warning with the body
		w.WriteHeader(http.StatusFound)
		fmt.Fprintf(w, "auth=%s key=%s token-only=%s trace=%s",
			r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), r.Header.Get("X-Trace"))
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt(port),
		HTTPHeaders: []corev1.HTTPHeader{
			{Name: "Authorization", Value: "Bearer s3cr3t-t0ken"},
			{Name: "X-Api-Key", Value: "k3y-v4lue"},
			{Name: "X-Trace", Value: "trace-42"},
		}}}}
	spec.DefaultProbe(p)
	d := newDispatcher(&scriptedExec{answers: []execAnswer{{}}}, probe.NewDialer(), false)
	got := d.probe(context.Background(), p, Target{Host: "127.0.0.1", Container: &spec.Container{}})
	require.NoError(t, got.err)
	assert.Equal(t, results.OutcomeWarning, got.raw)
	assert.Equal(t, "Probe terminated redirects, Response body: auth=[redacted] key=[redacted] token-only=[redacted] trace=trace-42", got.output)
}

// In the pod's network without a namespace path a network probe cannot
// run; an exec probe does not use the network.
func TestProbeInPodNetworkNeedsANamespace(t *testing.T) {
	// In the pod's network without a namespace path: the probe cannot run.
	d := newDispatcher(&scriptedExec{answers: []execAnswer{{}}}, probe.NewDialer(), false)
	tcp := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(80)}}}
	spec.DefaultProbe(tcp)
	got := d.probe(context.Background(), tcp, Target{Host: "10.0.0.1", Container: &spec.Container{}, InPodNetwork: true})
	assert.ErrorIs(t, got.err, errNoNetNS)
	// An exec probe does not use the network.
	got = d.probe(context.Background(), execProbe("true"), Target{Container: &spec.Container{}, InPodNetwork: true})
	assert.NoError(t, got.err)
}

// What a passing probe printed is not kept (kubelet keeps none): not its
// HTTP body, not its command's output. A warning's body is kept, as
// kubelet's ProbeWarning event carries it, and so is every failure's
// output. --keep-success-output keeps a success's too.
func TestSuccessOutputIsKeptOnlyWhenAsked(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/token":
			w.Write([]byte(`{"access_token":"ya29.secret"}`))
		case "/moved":
			http.Redirect(w, r, "http://192.0.2.1/", http.StatusFound) // another host: not followed
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	httpGet := func(path string) *corev1.Probe {
		p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt(port)}}}
		spec.DefaultProbe(p)
		return p
	}
	tests := []struct {
		name        string
		probe       *corev1.Probe
		exec        exec.Result
		wantRaw     results.Outcome
		wantDefault string // what is kept by default
		wantKept    string // with --keep-success-output
	}{
		{"an HTTP success", httpGet("/token"), exec.Result{}, results.OutcomeSuccess, "", `{"access_token":"ya29.secret"}`},
		{"an exec success", execProbe("cat", "/token"), exec.Result{Output: "ya29.secret"}, results.OutcomeSuccess, "", "ya29.secret"},
		{"an HTTP warning", httpGet("/moved"), exec.Result{}, results.OutcomeWarning,
			"Probe terminated redirects, Response body: <a href=\"http://192.0.2.1/\">Found</a>.\n\n", "Probe terminated redirects, Response body: <a href=\"http://192.0.2.1/\">Found</a>.\n\n"},
		{"an HTTP failure", httpGet("/broken"), exec.Result{}, results.OutcomeFailure, "HTTP probe failed with statuscode: 500", "HTTP probe failed with statuscode: 500"},
		{"an exec failure", execProbe("false"), exec.Result{ExitCode: 1, Output: "sick"}, results.OutcomeFailure, "sick", "sick"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for keep, want := range map[bool]string{false: tt.wantDefault, true: tt.wantKept} {
				d := newDispatcher(&scriptedExec{answers: []execAnswer{{result: tt.exec}}}, probe.NewDialer(), keep)
				got := d.probe(context.Background(), tt.probe, Target{Host: "127.0.0.1", ContainerID: "c", Container: &spec.Container{}})
				require.NoError(t, got.err)
				assert.Equal(t, tt.wantRaw, got.raw)
				assert.Equal(t, want, got.output, "keep success output: %v", keep)
			}
		})
	}
}

// A probe aimed at the node's cloud metadata service is refused before
// anything is sent: it could not run (thrown away, never counted towards
// a restart), with a reason of its own, and its error says where it was
// aimed and which flag allows it.
func TestDispatchRefusesMetadataDestinations(t *testing.T) {
	metadata := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Host: "169.254.169.254", Port: intstr.FromInt(80), Path: "/computeMetadata/v1/instance/service-accounts/default/token",
		HTTPHeaders: []corev1.HTTPHeader{{Name: "Metadata-Flavor", Value: "Google"}}}}}
	spec.DefaultProbe(metadata)
	scan := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "fd00:ec2::254", Port: intstr.FromInt(80)}}}
	spec.DefaultProbe(scan)
	for _, tt := range []struct {
		name  string
		probe *corev1.Probe
		want  string
	}{
		{"httpGet", metadata, "refused to probe 169.254.169.254 ("},
		{"tcpSocket", scan, "refused to probe fd00:ec2::254 ("},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := newDispatcher(&scriptedExec{answers: []execAnswer{{}}}, probe.NewDialer(), true)
			got := d.probe(context.Background(), tt.probe, Target{Host: "10.0.0.5", Container: &spec.Container{}})
			require.Error(t, got.err)
			assert.Equal(t, results.OutcomeUnknown, got.raw)
			assert.Equal(t, ReasonDestinationRefused, got.reason)
			assert.Contains(t, got.err.Error(), tt.want)
			assert.Contains(t, got.err.Error(), "--allow-probe-destination")
			assert.Empty(t, got.output)
		})
	}
}

// A probe that could not run ends its transcript as kubelet reports it:
// unknown, with the error.
func TestRunProbeTranscriptCouldNotProbe(t *testing.T) {
	p := &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(80)}}}
	tr := &probe.Transcript{}
	out := RunOnce(context.Background(), nil, p, Target{}, nil, tr) // no host
	require.Error(t, out.Err)
	rec := tr.Record()
	require.NotNil(t, rec.Result)
	assert.Equal(t, "unknown", rec.Result.Result)
	assert.Equal(t, "the pod has no IP address yet", rec.Result.Error)
	var text strings.Builder
	require.NoError(t, tr.Write(&text))
	assert.Contains(t, text.String(), "result:   unknown (could not probe")
	assert.Contains(t, text.String(), "error:    the pod has no IP address yet")
}

// A worker and cri-prober probe aim at a container alike: where the view
// resolved the pod's probes to go, or where --probe-network says.
func TestTargetFor(t *testing.T) {
	c := &spec.Container{Name: "app"}
	sb := &cri.Sandbox{ID: "sb", IPs: []string{"10.0.0.7"}, NetNS: "/var/run/netns/cni-1"}
	inPod := &pods.Pod{Key: "uid", Sandbox: sb, ProbeHost: "127.0.0.1", InPodNetwork: true}
	onNode := &pods.Pod{Key: "uid", Sandbox: sb, ProbeHost: "10.0.0.7"}
	for _, tt := range []struct {
		name    string
		pod     *pods.Pod
		network string
		want    Target
	}{
		{"the pod's own choice: its network", inPod, "",
			Target{Pod: "uid", Host: "127.0.0.1", ContainerID: "c1", Container: c, InPodNetwork: true, NetNS: sb.NetNS}},
		{"the pod's own choice: the node's", onNode, "",
			Target{Pod: "uid", Host: "10.0.0.7", ContainerID: "c1", Container: c, NetNS: sb.NetNS}},
		{"--probe-network pod", onNode, spec.ProbeNetworkPod,
			Target{Pod: "uid", Host: "127.0.0.1", ContainerID: "c1", Container: c, InPodNetwork: true, NetNS: sb.NetNS}},
		{"--probe-network node", inPod, spec.ProbeNetworkNode,
			Target{Pod: "uid", Host: "10.0.0.7", ContainerID: "c1", Container: c, NetNS: sb.NetNS}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, TargetFor(tt.pod, "c1", c, tt.network))
		})
	}
}
