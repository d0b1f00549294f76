// Package cri is cri-prober's boundary with the container runtime.
//
// It owns the CRI v1 client of the runtime and image services (Dial, with a
// deadline on every call but a pull and errors classified once:
// IsNotFound, IsUnavailable, ErrCommandTimedOut, Cause), the
// Poller that turns periodic CRI listings into immutable Snapshots and
// lifecycle Events, and the EventWatcher that follows containerd's own event
// stream so that exits are published within milliseconds.
//
// The poller's budget: two list calls per relist whatever the number of
// containers; ContainerStatus only for a container that is new or whose
// state changed; PodSandboxStatus only for a new sandbox.
//
// This package imports no other cri-prober package.
package cri
