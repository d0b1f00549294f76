// Package podmaker makes the agent's own pods as kubelet makes static
// pods, up to the CRI calls that pod sync (pkg/restart) makes: the host
// side of a pod before its sandbox (its record, volumes and log directory:
// pkg/podfs, as kubelet's volume manager), the prelude of kubelet's
// startContainer (the image made present, as kubelet's images/ manager:
// pull policies, serialized pulls, the pull back-off, kubelet's events and
// waiting reasons; the container's files on the host) and the CRI configs
// of its sandboxes and containers (pkg/podconfig, as kuberuntime
// generates them), and their teardown once the pod is gone.
//
// Maker implements restart.Maker, the interface pod sync declares for what
// it needs; pkg/agent wires one in. It imports pkg/restart for that
// interface's types (StartError, Recorder) and its back-off, and
// pkg/podfs, pkg/podconfig, pkg/pods, pkg/cri and pkg/events;
// pkg/restart never imports it.
package podmaker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/podconfig"
	"github.com/cri-prober/cri-prober/pkg/podfs"
	"github.com/cri-prober/cri-prober/pkg/podip"
	"github.com/cri-prober/cri-prober/pkg/pods"
	"github.com/cri-prober/cri-prober/pkg/restart"
)

// HostFS is the host side of the agent's static pods (podfs.Manager).
type HostFS interface {
	Node() podconfig.Node
	WriteRecord(r podfs.Record) error
	SetUp(ctx context.Context, pod *corev1.Pod) (map[string]podconfig.Volume, error)
	MakeLogsDir(namespace, name, uid string) (string, error)
	PrepareContainer(ctx context.Context, in podconfig.ContainerInput) (podconfig.ContainerInput, error)
	TearDown(ctx context.Context, uid string) error
	TearDownVolumes(ctx context.Context, uid string) error
	RemovePodCgroups(uid string) error
	RemoveLogs(namespace, name, uid string) error
	Pods() ([]podfs.PodDir, error)
}

var _ HostFS = (*podfs.Manager)(nil)

// Maker makes the agent's static pods as kubelet makes them: their
// host side (podfs: the pod directory, volumes, files), their images (the
// image service, as kubelet's image manager), and the CRI configs of
// their sandboxes and containers (podconfig, as kubelet generates them).
type Maker struct {
	fs       HostFS
	node     podconfig.Node
	images   *imagePuller
	recorder restart.Recorder
	clock    clock.PassiveClock
	sourceOf func(*pods.Pod) string
	match    func(podfs.Record) bool

	mu      sync.Mutex
	volumes map[string]map[string]podconfig.Volume // by pod UID: SetUp's
	records map[string]pods.Record                 // by pod UID: the pod records, read once, then kept in step
	changed chan struct{}                          // capacity 1: a record was made or removed
}

var _ restart.Maker = (*Maker)(nil)

// Config is how the maker records the pods it makes. Zero values are the
// defaults.
type Config struct {
	// SourceOf names what a static pod was made from in its pod record
	// (podfs.Record.Source; nil: the pod's manifest file).
	SourceOf func(*pods.Pod) string
	// MatchRecord says which pod records are this maker's (nil: every
	// record): the agent and `play` keep theirs apart under one root
	// directory.
	MatchRecord func(podfs.Record) bool
}

// New returns a maker of pods on fs, pulling images from images and
// telling what it does to rec (clk nil: the real clock), recording its
// pods as cfg says.
func New(fs HostFS, images ImageService, rec restart.Recorder, clk clock.PassiveClock, cfg Config) *Maker {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if cfg.SourceOf == nil {
		cfg.SourceOf = manifestFile
	}
	return &Maker{fs: fs, node: fs.Node(), images: newImagePuller(images, clk, rec), recorder: rec, clock: clk, sourceOf: cfg.SourceOf, match: cfg.MatchRecord,
		volumes: map[string]map[string]podconfig.Volume{}, changed: make(chan struct{}, 1)}
}

// manifestFile is the file a pod's manifest came from.
func manifestFile(p *pods.Pod) string {
	if p.Manifest == nil {
		return ""
	}
	return p.Manifest.File
}

// Changed is signalled when the maker made or removed a record.
func (m *Maker) Changed() <-chan struct{} { return m.changed }

func (m *Maker) signal() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// Records returns the records of the static pods this maker made and has
// not removed, by UID (pods.RecordSource): read from the pod records on
// disk once, then kept in step as it makes and removes pods.
func (m *Maker) Records() map[string]pods.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.records == nil {
		m.records = map[string]pods.Record{}
		dirs, err := m.fs.Pods()
		if err != nil {
			m.eventf(&pods.Pod{}, "", events.Warning, restart.ReasonFailed, "Cannot read the records of the pods the agent made: %v", err)
		}
		for _, d := range dirs {
			if d.Record != nil && (m.match == nil || m.match(*d.Record)) {
				m.records[d.UID] = pods.Record{Namespace: d.Record.Namespace, Name: d.Record.Name, Created: d.Record.Created}
			}
		}
	}
	return maps.Clone(m.records)
}

// object is the Pod a static pod is made from.
func object(p *pods.Pod) (*corev1.Pod, error) {
	if p.Manifest == nil || p.Manifest.Object == nil {
		return nil, fmt.Errorf("pod %s/%s: no manifest to make it from", p.Namespace, p.Name)
	}
	return p.Manifest.Object, nil
}

// Sandbox is kubelet's preparation of a pod before createPodSandbox: the
// agent's record of it first (so that its directory is known to be the
// agent's whatever happens next), its volumes (kubelet's volume manager
// mounts them before SyncPod), the sandbox's config, its log directory.
func (m *Maker) Sandbox(ctx context.Context, p *pods.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	pod, err := object(p)
	if err != nil {
		return nil, err
	}
	created := m.clock.Now()
	if !p.StartTime.IsZero() {
		created = p.StartTime
	}
	if err := m.fs.WriteRecord(podfs.Record{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Source: m.sourceOf(p), Created: created}); err != nil {
		return nil, fmt.Errorf("record the pod as the agent's: %w", err)
	}
	m.mu.Lock()
	if m.records != nil {
		if _, ok := m.records[p.UID]; !ok {
			m.records[p.UID] = pods.Record{Namespace: p.Namespace, Name: p.Name, Created: created}
			defer m.signal()
		}
	}
	m.mu.Unlock()
	if _, err := m.setUp(ctx, p, pod); err != nil {
		return nil, err
	}
	cfg, warnings, err := podconfig.SandboxWithWarnings(pod, attempt, m.node)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		// Once per sandbox made (kubelet repeats them at every sync).
		m.eventf(p, "", events.Warning, w.Reason, "%s", w.Message)
	}
	if _, err := m.fs.MakeLogsDir(p.Namespace, p.Name, p.UID); err != nil {
		return nil, fmt.Errorf("create the pod's log directory: %w", err)
	}
	return cfg, nil
}

// setUp sets the pod's volumes up (again: it is idempotent) and keeps
// them for its containers' mounts. A volume that cannot be set up is a
// FailedMount event per volume, as kubelet's volume manager records it.
func (m *Maker) setUp(ctx context.Context, p *pods.Pod, pod *corev1.Pod) (map[string]podconfig.Volume, error) {
	vols, err := m.fs.SetUp(ctx, pod)
	if err != nil {
		var setUp *podfs.SetUpError
		if errors.As(err, &setUp) {
			for _, f := range setUp.Failed {
				m.eventf(p, "", events.Warning, podfs.FailedMountReason, "%v", f)
			}
			return nil, &restart.StartError{Reason: "ContainerCreating", Message: err.Error()}
		}
		return nil, fmt.Errorf("set up the pod's volumes: %w", err)
	}
	m.mu.Lock()
	m.volumes[p.UID] = vols
	m.mu.Unlock()
	return vols, nil
}

// Container is kubelet's startContainer up to CreateContainer: the image
// made present, the container's files on the host (termination message,
// /etc/hosts, subpaths), then its config.
func (m *Maker) Container(ctx context.Context, p *pods.Pod, sandbox *cri.Sandbox, c *pods.Container, attempt int64) (*runtimeapi.ContainerConfig, *runtimeapi.PodSandboxConfig, error) {
	pod, err := object(p)
	if err != nil {
		return nil, nil, err
	}
	spec := specContainer(pod, c.Name)
	if spec == nil {
		return nil, nil, fmt.Errorf("pod %s/%s: no container %s in its manifest", p.Namespace, p.Name, c.Name)
	}
	sandboxCfg, err := podconfig.Sandbox(pod, sandbox.Attempt, m.node)
	if err != nil {
		return nil, nil, err
	}
	image, err := m.images.ensure(ctx, p, spec, spec.ImagePullPolicy, sandboxCfg)
	if err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	vols, ok := m.volumes[p.UID]
	m.mu.Unlock()
	if !ok { // the agent restarted since the sandbox was made
		if vols, err = m.setUp(ctx, p, pod); err != nil {
			return nil, nil, err
		}
	}
	if attempt < 0 {
		dir := m.node.Layout().ContainerLogsDirectory(p.Namespace, p.Name, types.UID(p.UID), c.Name)
		n, err := restartCountFromLogs(dir)
		if err != nil {
			return nil, nil, err
		}
		attempt = int64(n)
	}
	in := podconfig.ContainerInput{Pod: pod, Container: spec, RestartCount: int(attempt), PodIP: podip.Primary(sandbox.IPs, m.node.IP()),
		PodIPs: sandbox.IPs, Image: image, Volumes: vols}
	if in, err = m.fs.PrepareContainer(ctx, in); err != nil {
		return nil, nil, m.configError(p, c, err)
	}
	cfg, err := podconfig.Container(in, m.node)
	if err != nil {
		return nil, nil, m.configError(p, c, err)
	}
	return cfg, sandboxCfg, nil
}

// configError is a container whose config cannot be made: kubelet's
// CreateContainerConfigError with its message, and its event.
func (m *Maker) configError(p *pods.Pod, c *pods.Container, err error) error {
	var ce *podconfig.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	m.eventf(p, c.Name, events.Warning, "Failed", "Error: %s", ce.Message)
	return &restart.StartError{Reason: podconfig.ReasonCreateContainerConfigError, Message: ce.Message}
}

// specContainer is the container of the pod's spec with the given name.
func specContainer(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// TearDown removes what a pod left on the host once its sandboxes are
// gone (kubelet's cleanup of a removed pod): its directory (volumes
// unmounted first), its cgroups and its logs.
func (m *Maker) TearDown(ctx context.Context, p *pods.Pod) error {
	// The record goes last (with the directory): until then a teardown cut
	// short is finished by the next sync, or the next agent.
	if err := m.fs.RemovePodCgroups(p.UID); err != nil {
		return err
	}
	if err := m.fs.RemoveLogs(p.Namespace, p.Name, p.UID); err != nil {
		return err
	}
	if err := m.fs.TearDown(ctx, p.UID); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.volumes, p.UID)
	delete(m.records, p.UID)
	m.mu.Unlock()
	m.signal()
	return nil
}

// TearDownTerminated tears down what a pod that finished (Succeeded or
// Failed) and stays holds on the host, as kubelet's volume manager and
// SyncTerminatedPod do: its volumes (emptyDir contents removed, tmpfs
// unmounted, downwardAPI and projected files removed) and its pod cgroup
// (removed if present and empty). Its directory, record and logs stay
// until the pod is removed. The gc package calls it once the pod's
// containers and sandbox have stopped.
func (m *Maker) TearDownTerminated(ctx context.Context, p *pods.Pod) error {
	if err := m.fs.TearDownVolumes(ctx, p.UID); err != nil {
		return err
	}
	// SetUp makes them again if the pod is ever started again.
	m.mu.Lock()
	delete(m.volumes, p.UID)
	m.mu.Unlock()
	return m.fs.RemovePodCgroups(p.UID)
}

// RemovePodLogs removes the pod's log directory, as TearDown does, for a
// pod whose content may be removed while its record stays (an evicted
// pod: kubelet's evictPodLogsDirectories). The gc package calls it at its
// collections.
func (m *Maker) RemovePodLogs(_ context.Context, p *pods.Pod) error {
	return m.fs.RemoveLogs(p.Namespace, p.Name, p.UID)
}

func (m *Maker) eventf(p *pods.Pod, container, eventType, reason, format string, args ...any) {
	m.recorder.Record(events.Event{Time: m.clock.Now(), Type: eventType, Reason: reason, Namespace: p.Namespace, Pod: p.Name,
		Container: container, Message: fmt.Sprintf(format, args...)})
}

var logFileName = regexp.MustCompile(`^(\d+)\.log(\..*)?`)

// restartCountFromLogs is kubelet's calcRestartCountByLogDir: with no
// instance of a container left in the runtime (all removed, or a runtime
// that lost its state), the next attempt follows the log files already in
// its log directory, so that none is written over.
func restartCountFromLogs(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	count := 0
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := logFileName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if n, err := strconv.Atoi(m[1]); err == nil && n+1 > count {
			count = n + 1
		}
	}
	return count, nil
}
