package pods

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// The oracle: kubelet 1.36.3's own generateAPIPodStatus answered the pod
// shapes of testdata/kubelet/status-cases.json in status-kubelet.json
// (testdata/kubelet/status_oracle_test.go.txt says how it was made). The
// report must say the same: phase, conditions (type, status, reason,
// message), and each container's state, last state, restart count, ready
// and started. Times are compared to the second (the API's precision);
// kubelet's containerID is "containerd://<id>", the report's the ID.

type oracleSandbox struct {
	ID          string `json:"id"`
	Ready       bool   `json:"ready"`
	CreatedAt   int64  `json:"createdAt"`
	IP          string `json:"ip"`
	HostNetwork bool   `json:"hostNetwork"`
	Attempt     uint32 `json:"attempt"`
}

type oracleContainer struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	SandboxID    string `json:"sandboxId"`
	State        string `json:"state"`
	CreatedAt    int64  `json:"createdAt"`
	StartedAt    int64  `json:"startedAt"`
	FinishedAt   int64  `json:"finishedAt"`
	ExitCode     int32  `json:"exitCode"`
	Reason       string `json:"reason"`
	Message      string `json:"message"`
	RestartCount *int   `json:"restartCount"`
}

type oracleCase struct {
	Name       string                  `json:"name"`
	Pod        *corev1.Pod             `json:"pod"`
	Sandboxes  []oracleSandbox         `json:"sandboxes"`
	Containers []oracleContainer       `json:"containers"`
	Reasons    map[string]StateWaiting `json:"reasons"`
	Deleting   bool                    `json:"deleting"`
}

type oracleAnswer struct {
	Name                  string                   `json:"name"`
	Phase                 corev1.PodPhase          `json:"phase"`
	Conditions            []corev1.PodCondition    `json:"conditions"`
	InitContainerStatuses []corev1.ContainerStatus `json:"initContainerStatuses"`
	ContainerStatuses     []corev1.ContainerStatus `json:"containerStatuses"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, v))
}

// oraclePod is the case's pod as the View has it: a static pod (a static
// pod, as kubelet's: never terminal by losing its sandbox) of the case's
// manifest, resolved from the runtime's sandboxes and containers, and
// what the pod sync adds: its waiting reasons (kubelet's reason cache).
func oraclePod(t *testing.T, c oracleCase) (*Pod, PodStatus) {
	t.Helper()
	obj := c.Pod
	m := &spec.Pod{Source: "oracle", Namespace: obj.Namespace, Name: obj.Name, UID: string(obj.UID), RestartPolicy: obj.Spec.RestartPolicy,
		TerminationGracePeriodSeconds: 30, Object: obj}
	for _, ic := range obj.Spec.InitContainers {
		kind := spec.Init
		if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			kind = spec.Sidecar
		}
		m.Containers = append(m.Containers, spec.Container{Name: ic.Name, Kind: kind, RestartPolicy: ic.RestartPolicy})
	}
	for _, rc := range obj.Spec.Containers {
		m.Containers = append(m.Containers, spec.Container{Name: rc.Name})
	}
	var sandboxes []*cri.Sandbox
	for _, sb := range c.Sandboxes {
		state := cri.SandboxNotReady
		if sb.Ready {
			state = cri.SandboxReady
		}
		p := &cri.Sandbox{ID: sb.ID, Namespace: obj.Namespace, Name: obj.Name, UID: string(obj.UID), Attempt: sb.Attempt, State: state,
			CreatedAt: time.Unix(sb.CreatedAt, 0), HostNetwork: sb.HostNetwork}
		if sb.IP != "" {
			p.IPs = []string{sb.IP}
		}
		sandboxes = append(sandboxes, agents(p))
	}
	var containers []*cri.Container
	for _, ct := range c.Containers {
		i := &cri.Container{ID: ct.ID, SandboxID: ct.SandboxID, Name: ct.Name, CreatedAt: time.Unix(ct.CreatedAt, 0),
			ExitCode: ct.ExitCode, Reason: ct.Reason, Message: ct.Message}
		if ct.StartedAt != 0 {
			i.StartedAt = time.Unix(ct.StartedAt, 0)
		}
		if ct.FinishedAt != 0 {
			i.FinishedAt = time.Unix(ct.FinishedAt, 0)
		}
		if ct.RestartCount != nil {
			i.Attempt = uint32(*ct.RestartCount)
			i.Annotations = map[string]string{podconfig.AnnotationRestartCount: strconv.Itoa(*ct.RestartCount)}
		}
		i.State = map[string]cri.ContainerState{"running": cri.StateRunning, "exited": cri.StateExited, "created": cri.StateCreated}[ct.State]
		containers = append(containers, i)
	}
	v := Resolve(cri.NewSnapshot(time.Unix(1000, 0), sandboxes, containers), Inputs{StaticPods: []*spec.Pod{m}})
	p, ok := v.Pod(string(obj.UID))
	require.True(t, ok)
	p.Terminating = c.Deleting
	added := PodStatus{Waiting: map[string]Waiting{}}
	for _, pc := range p.Containers {
		if r, ok := c.Reasons[pc.Name]; ok {
			added.Waiting[pc.Name] = Waiting{Reason: r.Reason, Message: r.Message}
		}
	}
	return p, added
}

// fromKubelet is a kubelet state as the report writes it.
func fromKubelet(s corev1.ContainerState) ContainerState {
	var out ContainerState
	tm := func(t interface{ IsZero() bool }, v time.Time) time.Time {
		if t.IsZero() {
			return time.Time{}
		}
		return v
	}
	if w := s.Waiting; w != nil {
		out.Waiting = &StateWaiting{Reason: w.Reason, Message: w.Message}
	}
	if r := s.Running; r != nil {
		out.Running = &StateRunning{StartedAt: tm(&r.StartedAt, r.StartedAt.Time)}
	}
	if x := s.Terminated; x != nil {
		out.Terminated = &StateTerminated{ExitCode: x.ExitCode, Reason: x.Reason, Message: x.Message, StartedAt: tm(&x.StartedAt, x.StartedAt.Time),
			FinishedAt: tm(&x.FinishedAt, x.FinishedAt.Time), ContainerID: strings.TrimPrefix(x.ContainerID, "containerd://")}
	}
	return out
}

// seconds drops what the API does not keep of a report's times, and the
// time zone.
func seconds(s ContainerState) ContainerState {
	at := func(t time.Time) time.Time {
		if t.IsZero() {
			return t
		}
		return time.Unix(t.Unix(), 0)
	}
	if r := s.Running; r != nil {
		s.Running = &StateRunning{StartedAt: at(r.StartedAt)}
	}
	if x := s.Terminated; x != nil {
		c := *x
		c.StartedAt, c.FinishedAt = at(c.StartedAt), at(c.FinishedAt)
		s.Terminated = &c
	}
	return s
}

func TestKubeletStatusOracle(t *testing.T) {
	var cases []oracleCase
	var answers []oracleAnswer
	readJSON(t, "testdata/kubelet/status-cases.json", &cases)
	readJSON(t, "testdata/kubelet/status-kubelet.json", &answers)
	require.Len(t, answers, len(cases), "status-kubelet.json answers status-cases.json: make it again")
	for i, c := range cases {
		want := answers[i]
		t.Run(c.Name, func(t *testing.T) {
			require.Equal(t, c.Name, want.Name)
			p, added := oraclePod(t, c)
			r := ReportPod(p, added, results.NewStore(), GateSet{})
			assert.Equal(t, want.Phase, r.Phase, "phase")
			var wantConds, gotConds []cond
			var wantTypes, gotTypes []corev1.PodConditionType
			for _, k := range want.Conditions {
				wantTypes = append(wantTypes, k.Type)
				wantConds = append(wantConds, cond{k.Status, k.Reason, k.Message})
			}
			for _, k := range r.Conditions {
				gotTypes = append(gotTypes, k.Type)
				gotConds = append(gotConds, cond{k.Status, k.Reason, k.Message})
			}
			assert.Equal(t, wantTypes, gotTypes, "conditions")
			assert.Equal(t, wantConds, gotConds, "conditions")
			assert.Equal(t, conditionTrue(r.Conditions, corev1.PodReady), r.Ready)
			statuses := map[string]corev1.ContainerStatus{}
			for _, s := range append(append([]corev1.ContainerStatus{}, want.InitContainerStatuses...), want.ContainerStatuses...) {
				statuses[s.Name] = s
			}
			require.Len(t, r.Containers, len(statuses))
			for _, got := range r.Containers {
				k, ok := statuses[got.Name]
				require.True(t, ok, got.Name)
				assert.Equal(t, fromKubelet(k.State), seconds(got.Status.State), "%s: state", got.Name)
				assert.Equal(t, fromKubelet(k.LastTerminationState), seconds(got.Status.LastState), "%s: last state", got.Name)
				assert.Equal(t, k.RestartCount, got.RestartCount, "%s: restart count", got.Name)
				assert.Equal(t, k.Ready, got.Ready, "%s: ready", got.Name)
				assert.Equal(t, k.Started != nil && *k.Started, got.Started, "%s: started", got.Name)
			}
		})
	}
}
