// Package podfs keeps the host side of the pods the agent runs itself, as
// kubelet keeps it for static pods: the pod directory under kubelet's
// --root-dir layout, its volumes (emptyDir, hostPath, downwardAPI and
// projected downwardAPI), the small files kubelet writes for a pod
// (etc-hosts, termination message files), safe subPaths, the agent's
// record that a pod directory is its own, and the cleanup of all that,
// of the pod's log directory and of its cgroups.
//
// It follows kubelet v1.36.3: the volume manager and the volume plugins
// (pkg/volume/...), makePodDataDirs, ensureHostsFile and the orphaned pod
// cleanup (kubelet_volumes.go); each function names what it follows. It
// decides nothing about what a Pod means (field values, resources, CRI
// configs): those come from the caller.
//
// Every operation can be repeated: a pod directory left half made or half
// removed (the agent killed mid-way) is finished by calling the same
// operation again. A Manager serialises its operations.
package podfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/utils/clock"
)

// Config is what a Manager needs to know of the node.
type Config struct {
	// RootDir is kubelet's --root-dir (/var/lib/kubelet by default): pod
	// directories are made under <RootDir>/pods. Created 0750 when missing
	// (kubelet's setupDataDirs).
	RootDir string
	// CgroupRoot is where the cgroup filesystems are mounted, for
	// RemovePodCgroups; "" is /sys/fs/cgroup.
	CgroupRoot string
	// NodeAllocatableMemory is the node's allocatable memory in bytes:
	// kubelet's default size of a memory-backed volume (a tmpfs); 0 leaves
	// a tmpfs at the kernel's default (half the RAM) unless the pod or the
	// volume gives a limit.
	NodeAllocatableMemory int64
	// Clock stamps ownership records and the atomic writer's directories;
	// nil is the real clock.
	Clock clock.PassiveClock
}

// Manager makes, maintains and removes the host side of pods under one
// root directory. Its methods are safe for concurrent use: they run one at
// a time.
type Manager struct {
	layout      Layout
	cgroupRoot  string
	allocatable int64
	clock       clock.PassiveClock
	mnt         mounter

	mu sync.Mutex
}

// New returns a Manager for cfg, creating the root directory when missing.
// The root's path is resolved once (symbolic links in it are the
// operator's choice), so that the paths the Manager gives out are the ones
// the kernel lists as mount points.
func New(cfg Config) (*Manager, error) {
	if cfg.RootDir == "" {
		return nil, errors.New("podfs: no root directory given")
	}
	if cfg.NodeAllocatableMemory < 0 {
		return nil, fmt.Errorf("podfs: node allocatable memory %d is negative", cfg.NodeAllocatableMemory)
	}
	root, err := filepath.Abs(cfg.RootDir)
	if err != nil {
		return nil, fmt.Errorf("podfs: root directory %s: %w", cfg.RootDir, err)
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
	cg := cfg.CgroupRoot
	if cg == "" {
		cg = "/sys/fs/cgroup"
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Manager{
		layout:      Layout{Root: root},
		cgroupRoot:  cg,
		allocatable: cfg.NodeAllocatableMemory,
		clock:       clk,
		mnt:         sysMounter{},
	}, nil
}

// Layout returns the Manager's paths.
func (m *Manager) Layout() Layout { return m.layout }
