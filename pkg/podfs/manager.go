// Package podfs keeps the host side of the pods the agent runs itself, as
// kubelet keeps it for static pods: the pod directory under kubelet's
// --root-dir layout (podconfig.Layout), its volumes (emptyDir, hostPath,
// downwardAPI and projected downwardAPI), what a container's start needs
// from the host (subPath bind mounts, the etc-hosts file, termination
// message files, env files), the agent's record that a pod directory is
// its own, and the cleanup of all that, of the pod's log directory and of
// its cgroups. The node it works for (podconfig.Node) pkg/node learns.
//
// It follows kubelet v1.36.3: the volume manager and the volume plugins
// (pkg/volume/...), makePodDataDirs, GenerateRunContainerOptions'
// makeMounts and ensureHostsFile, the subpather and the orphaned pod
// cleanup (kubelet_volumes.go); each function names what it follows. What
// a Pod means (field values, resources, paths, CRI configs) it takes from
// pkg/podconfig, so that the host side and the configs state each of
// kubelet's rules once.
//
// Every operation can be repeated: a pod directory left half made or half
// removed (the agent killed mid-way) is finished by calling the same
// operation again. A Manager serialises the operations on one pod; those
// on different pods run at once (their fsyncs share the file system's
// commits instead of queueing behind each other).
package podfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/podconfig"
)

// DefaultNodeHostsFile is the node's hosts file, the base of a host-network
// pod's /etc/hosts (kubelet's etcHostsPath).
const DefaultNodeHostsFile = "/etc/hosts"

// Config is what a Manager needs to know of the node.
type Config struct {
	// Node is the node as kubelet knows it (node.Discover): its Layout()
	// places the pod directories (RootDir is created 0750 when missing,
	// kubelet's setupDataDirs), the pods' logs and the bind targets of
	// subPaths; its Allocatable memory bounds a memory-backed volume; its
	// Allocatable feeds downwardAPI resourceFieldRefs; its CgroupRoot and
	// CgroupDriver name the pod cgroups RemovePodCgroups removes.
	Node podconfig.Node
	// CgroupFS is where the cgroup file systems are mounted, for
	// RemovePodCgroups; "" is /sys/fs/cgroup.
	CgroupFS string
	// NodeHostsFile is the node's hosts file; "" is /etc/hosts.
	NodeHostsFile string
	// Clock stamps pod records and the atomic writer's directories;
	// nil is the real clock.
	Clock clock.PassiveClock
}

// Manager makes, maintains and removes the host side of pods under one
// root directory. Its methods are safe for concurrent use: those on one
// pod run one at a time, and Pods runs alone.
type Manager struct {
	node      podconfig.Node
	layout    podconfig.Layout
	cgroupFS  string
	hostsFile string
	clock     clock.PassiveClock
	mnt       mounter

	// mu: a pod's operations hold it shared (and their pod's lock), Pods
	// exclusively.
	mu       sync.RWMutex
	podsMu   sync.Mutex
	podLocks map[string]*podLock
}

// podLock serialises the operations on one pod; refs counts its holders
// and waiters, so that it is dropped when none is left.
type podLock struct {
	sync.Mutex
	refs int
}

// lockPod takes pod uid's lock (and the Manager's, shared) and returns
// its release.
func (m *Manager) lockPod(uid string) (unlock func()) {
	m.mu.RLock()
	m.podsMu.Lock()
	if m.podLocks == nil {
		m.podLocks = map[string]*podLock{}
	}
	l, ok := m.podLocks[uid]
	if !ok {
		l = &podLock{}
		m.podLocks[uid] = l
	}
	l.refs++
	m.podsMu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		m.podsMu.Lock()
		if l.refs--; l.refs == 0 {
			delete(m.podLocks, uid)
		}
		m.podsMu.Unlock()
		m.mu.RUnlock()
	}
}

// New returns a Manager for cfg, creating the root directory when missing.
// The root's path is resolved once (symbolic links in it are the
// operator's choice), so that the paths the Manager gives out are the ones
// the kernel lists as mount points: Node returns cfg.Node with that root,
// the node to make the pods' configs with (podconfig.Sandbox and
// Container), so that the configs name the Manager's paths.
func New(cfg Config) (*Manager, error) {
	node := cfg.Node
	root, err := filepath.Abs(node.Layout().RootDir)
	if err != nil {
		return nil, fmt.Errorf("podfs: root directory %s: %w", node.RootDir, err)
	}
	if err := os.MkdirAll(root, 0o750); err != nil {
		return nil, fmt.Errorf("podfs: root directory: %w", err)
	}
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return nil, fmt.Errorf("podfs: root directory: %w", err)
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("podfs: root directory: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("podfs: root directory %s is not a directory", root)
	}
	node.RootDir = root
	if mem, ok := node.Allocatable[corev1.ResourceMemory]; ok && mem.Sign() < 0 {
		return nil, errors.New("podfs: the node's allocatable memory is negative")
	}
	cg := cfg.CgroupFS
	if cg == "" {
		cg = "/sys/fs/cgroup"
	}
	hosts := cfg.NodeHostsFile
	if hosts == "" {
		hosts = DefaultNodeHostsFile
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Manager{
		node:      node,
		layout:    node.Layout(),
		cgroupFS:  cg,
		hostsFile: hosts,
		clock:     clk,
		mnt:       sysMounter{},
	}, nil
}

// Node returns the node the Manager works with: its Config's, with the
// root directory resolved. Give it to podconfig.
func (m *Manager) Node() podconfig.Node { return m.node }

// Layout returns the Manager's paths, Node().Layout().
func (m *Manager) Layout() podconfig.Layout { return m.layout }
