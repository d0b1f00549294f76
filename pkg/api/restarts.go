package api

import (
	"time"

	"github.com/cri-prober/cri-prober/pkg/ledger"
	"github.com/cri-prober/cri-prober/pkg/restart"
)

// Restart is one restart (or stop) the agent did, and why, as the API
// serves it (GET …/restarts, cri-prober why): ledger.Entry on the wire.
type Restart struct {
	Time time.Time `json:"time"` // when the replacement started (or the container was stopped)
	// Node is the node the restart was on (run --node-name).
	Node      string `json:"node,omitempty"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	PodUID    string `json:"podUid"`
	Container string `json:"container"`
	// ContainerID is the instance that failed or exited.
	ContainerID string `json:"containerId"`
	// Cause is liveness or startup (a probe reached its failure
	// threshold), postStart (the hook failed) or exit (the container
	// exited by itself).
	Cause restart.Cause `json:"cause"`
	// Failures are the probe results that reached the threshold, oldest
	// first (for a probe cause); GET …/restarts bounds their output.
	Failures   []RestartFailure `json:"failures,omitempty"`
	ExitCode   int32            `json:"exitCode"`
	ExitReason string           `json:"exitReason,omitempty"`
	// GracePeriodSeconds is the grace period of the kill (a probe cause).
	GracePeriodSeconds int64 `json:"gracePeriodSeconds,omitempty"`
	// BackOffSeconds is how long the replacement waited after the exit
	// (kubelet's back-off; 0: at once).
	BackOffSeconds float64 `json:"backOffSeconds"`
	// Action is restarted (a replacement started) or stopped (the restart
	// policy or --restart=stop keeps it down).
	Action        string `json:"action"`
	ReplacementID string `json:"replacementId,omitempty"`
	Attempt       uint32 `json:"attempt,omitempty"` // the replacement's
}

// RestartFailure is one probe result that led to a restart.
type RestartFailure struct {
	Time        time.Time `json:"time"`
	Output      string    `json:"output"`
	Consecutive int       `json:"consecutive"`
	Threshold   int       `json:"threshold"`
}

// restartOf is the ledger's entry as the API serves it.
func restartOf(e ledger.Entry) Restart {
	r := Restart{Time: e.Time, Node: e.Node, Namespace: e.Namespace, Pod: e.Pod, PodUID: e.PodUID, Container: e.Container,
		ContainerID: e.ContainerID, Cause: restart.Cause(e.Cause), ExitCode: e.ExitCode, ExitReason: e.ExitReason,
		GracePeriodSeconds: e.GracePeriodSeconds, BackOffSeconds: e.BackOffSeconds, Action: e.Action, ReplacementID: e.ReplacementID, Attempt: e.Attempt}
	for _, f := range e.Failures {
		r.Failures = append(r.Failures, RestartFailure{Time: f.Time, Output: f.Output, Consecutive: f.Consecutive, Threshold: f.Threshold})
	}
	return r
}
