package cri

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/podip"
)

// SandboxState is a pod sandbox's CRI state.
type SandboxState string

const (
	SandboxReady    SandboxState = "Ready"
	SandboxNotReady SandboxState = "NotReady"
)

// ContainerState is a container's CRI state. Running maps to kubelet's
// State.Running, Exited to State.Terminated, Created and Unknown to waiting.
type ContainerState string

const (
	StateCreated ContainerState = "Created"
	StateRunning ContainerState = "Running"
	StateExited  ContainerState = "Exited"
	StateUnknown ContainerState = "Unknown"
)

func sandboxStateFromCRI(s runtimeapi.PodSandboxState) SandboxState {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return SandboxReady
	}
	return SandboxNotReady
}

func containerStateFromCRI(s runtimeapi.ContainerState) ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return StateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return StateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return StateExited
	default:
		return StateUnknown
	}
}

// Sandbox is one pod sandbox as the poller last saw it. Values published in a
// Snapshot are never modified; the poller replaces them.
type Sandbox struct {
	ID          string       `json:"id"`
	Namespace   string       `json:"namespace"`
	Name        string       `json:"name"`
	UID         string       `json:"uid"`
	Attempt     uint32       `json:"attempt"`
	State       SandboxState `json:"state"`
	CreatedAt   time.Time    `json:"createdAt"`
	IPs         []string     `json:"ips,omitempty"`
	HostNetwork bool         `json:"hostNetwork,omitempty"`
	// NetNS is the path of the sandbox's network namespace, from the
	// runtime's verbose status (containerd: its OCI spec); "" if unknown.
	NetNS       string            `json:"netns,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// IP returns the pod's primary IP, kubelet's status.podIP, given the
// node's address (its IP family; "" for IPv4): podip.Primary. It is "" for
// host-network sandboxes or before the network is set up. Every command
// and API that shows or probes a pod IP takes it from here.
func (p *Sandbox) IP(nodeIP string) string { return podip.Primary(p.IPs, nodeIP) }

// Container is one container as the poller last saw it. Values published in
// a Snapshot are never modified; the poller replaces them.
//
// Reason is the runtime's for an exited container (Completed, Error,
// OOMKilled, ContainerCannotRun…). Message is kubelet's status message for
// it: the runtime's message (cut to bounded.Message), then ": " and the
// container's termination message when it has one (the end of its
// terminationMessagePath file, at most 4 KiB, or with
// FallbackToLogsOnError at most 2 KiB of its log's end; termination.go).
type Container struct {
	ID          string            `json:"id"`
	SandboxID   string            `json:"sandboxId"`
	Name        string            `json:"name"`
	Attempt     uint32            `json:"attempt"`
	State       ContainerState    `json:"state"`
	CreatedAt   time.Time         `json:"createdAt"`
	StartedAt   time.Time         `json:"startedAt,omitzero"`
	FinishedAt  time.Time         `json:"finishedAt,omitzero"`
	ExitCode    int32             `json:"exitCode"`
	Reason      string            `json:"reason,omitempty"`
	Message     string            `json:"message,omitempty"`
	Image       string            `json:"image"`
	ImageRef    string            `json:"imageRef,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// LogPath is the container's log file on the host, from its status
	// (the pod's log directory joined with the container's log path; ""
	// before its first status, or when it has no log): what the log
	// rotation, the links of /var/log/containers and the removal of an
	// instance's files act on.
	LogPath string `json:"logPath,omitempty"`
}

// Snapshot is an immutable view of the runtime after one relist. Its slices
// and the values they point to must not be modified.
type Snapshot struct {
	// Time is when the relist that produced the snapshot started.
	Time time.Time
	// Seq numbers the relist that produced the snapshot (Poller.Relists
	// when it started): a snapshot of Seq n shows everything done before
	// relist n started.
	Seq        uint64
	pods       []*Sandbox
	containers []*Container
	podByID    map[string]*Sandbox
	byPod      map[string][]*Container
	contByID   map[string]*Container
}

// NewSnapshot returns the snapshot of these sandboxes and containers taken
// at a time (the poller makes them; tests and tools may too). It takes
// ownership of the slices.
func NewSnapshot(at time.Time, pods []*Sandbox, containers []*Container) *Snapshot {
	slices.SortFunc(pods, func(a, b *Sandbox) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return a.CreatedAt.Compare(b.CreatedAt)
	})
	slices.SortFunc(containers, func(a, b *Container) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Attempt, b.Attempt); c != 0 {
			return c
		}
		return a.CreatedAt.Compare(b.CreatedAt)
	})
	s := &Snapshot{
		Time:       at,
		pods:       pods,
		containers: containers,
		podByID:    make(map[string]*Sandbox, len(pods)),
		byPod:      make(map[string][]*Container, len(pods)),
		contByID:   make(map[string]*Container, len(containers)),
	}
	for _, p := range pods {
		s.podByID[p.ID] = p
	}
	for _, c := range containers {
		s.contByID[c.ID] = c
		s.byPod[c.SandboxID] = append(s.byPod[c.SandboxID], c)
	}
	return s
}

// at returns a snapshot with the same contents taken at another time, by
// relist seq. The contents are shared: both are immutable.
func (s *Snapshot) at(t time.Time, seq uint64) *Snapshot {
	c := *s
	c.Time, c.Seq = t, seq
	return &c
}

// sameContents reports whether s and o share their contents (one was made
// from the other by at), which then needs no comparison.
func (s *Snapshot) sameContents(o *Snapshot) bool {
	return sameSlice(s.pods, o.pods) && sameSlice(s.containers, o.containers)
}

// sameSlice reports whether a and b are the same slice (same array, same
// length), not merely equal ones.
func sameSlice[T any](a, b []*T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// Sandboxes returns all sandboxes ordered by namespace, name and creation.
func (s *Snapshot) Sandboxes() []*Sandbox { return s.pods }

// Containers returns all containers.
func (s *Snapshot) Containers() []*Container { return s.containers }

// Sandbox returns the sandbox with the given ID.
func (s *Snapshot) Sandbox(id string) (*Sandbox, bool) {
	p, ok := s.podByID[id]
	return p, ok
}

// Container returns the container with the given ID.
func (s *Snapshot) Container(id string) (*Container, bool) {
	c, ok := s.contByID[id]
	return c, ok
}

// PodContainers returns a sandbox's containers ordered by name and attempt.
func (s *Snapshot) PodContainers(sandboxID string) []*Container { return s.byPod[sandboxID] }

// MarshalJSON renders the snapshot as {"time", "pods": [{…, "containers": […]}]},
// containers nested under their pod.
func (s *Snapshot) MarshalJSON() ([]byte, error) {
	type podJSON struct {
		*Sandbox
		Containers []*Container `json:"containers"`
	}
	out := struct {
		Time      time.Time `json:"time"`
		Sandboxes []podJSON `json:"pods"`
	}{Time: s.Time, Sandboxes: make([]podJSON, 0, len(s.pods))}
	for _, p := range s.pods {
		ctrs := s.byPod[p.ID]
		if ctrs == nil {
			ctrs = []*Container{}
		}
		out.Sandboxes = append(out.Sandboxes, podJSON{Sandbox: p, Containers: ctrs})
	}
	return json.Marshal(out)
}

// Select returns a snapshot holding only the pods keep accepts, with their
// containers.
func (s *Snapshot) Select(keep func(*Sandbox) bool) *Snapshot {
	var pods []*Sandbox
	var containers []*Container
	for _, p := range s.pods {
		if keep(p) {
			pods = append(pods, p)
			containers = append(containers, s.byPod[p.ID]...)
		}
	}
	return NewSnapshot(s.Time, pods, containers)
}

// Key identifies the pod a sandbox belongs to: its UID, so that a re-created
// sandbox (same UID, next attempt) is the same pod, as for kubelet; or its
// OwnKey for a sandbox created without one, or with a UID that could be
// taken for an OwnKey. (The resolver gives a sandbox whose UID another pod
// holds the OwnKey of its pod's oldest sandbox instead: pkg/pods.)
func (p *Sandbox) Key() string {
	if p.UID != "" && !strings.HasPrefix(p.UID, ownKeyPrefix) {
		return p.UID
	}
	return p.OwnKey()
}

// OwnKey is "sandbox:<id>": a key of this sandbox alone, never another
// sandbox's (IDs are unique) nor a UID's (Key never gives a UID of that
// form).
func (p *Sandbox) OwnKey() string { return ownKeyPrefix + p.ID }

const ownKeyPrefix = "sandbox:"

// AnnotationRestartOf is set by cri-prober on a container it creates to
// replace another (the value is the replaced container's ID), so that a
// replacement found created but not started after an agent restart is
// known to be cri-prober's to start.
const AnnotationRestartOf = "cri-prober.io/restart-of"

// AnnotationRestartCause is set beside AnnotationRestartOf: why the
// replaced container was restarted (liveness, startup or exit), so that an
// agent that finishes an interrupted restart can still say why.
const AnnotationRestartCause = "cri-prober.io/restart-cause"
