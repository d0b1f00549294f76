package restart

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Entry is one restart (or stop) the restarter did, and why: the question
// users ask most (kubernetes#6532, #115823).
type Entry struct {
	Time      time.Time `json:"time"` // when the replacement started (or the container was stopped)
	Namespace string    `json:"namespace"`
	Pod       string    `json:"pod"`
	PodUID    string    `json:"podUid"`
	Container string    `json:"container"`
	// ContainerID is the instance that failed or exited.
	ContainerID string `json:"containerId"`
	// Cause is liveness or startup (a probe reached its failure
	// threshold), postStart (the hook failed) or exit (the container exited
	// by itself).
	Cause string `json:"cause"`
	// Failures are the probe results that reached the threshold, oldest
	// first (for a probe cause).
	Failures   []Failure `json:"failures,omitempty"`
	ExitCode   int32     `json:"exitCode"`
	ExitReason string    `json:"exitReason,omitempty"`
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

// Failure is one probe result that led to a restart.
type Failure struct {
	Time        time.Time `json:"time"`
	Output      string    `json:"output"`
	Consecutive int       `json:"consecutive"`
	Threshold   int       `json:"threshold"`
}

// Actions.
const (
	ActionRestarted = "restarted"
	ActionStopped   = "stopped"
)

// ledgerSize bounds the ledger: the newest entries are kept.
const ledgerSize = 1000

// ledgerFile is the ledger's file in the state directory.
const ledgerFile = "restarts.json"

// Ledger keeps the newest restarts, and in a file when it has a directory,
// so that they survive the agent's restart. Safe for concurrent use.
type Ledger struct {
	mu      sync.Mutex
	path    string // "": memory only
	entries []Entry
}

// OpenLedger returns a ledger kept in dir ("" for memory only), with the
// entries a previous agent left there. A file that cannot be read as a
// ledger is set aside (renamed *.bad) and reported in the error, and the
// ledger starts empty: a bad file must not stop the agent.
func OpenLedger(dir string) (*Ledger, error) {
	l := &Ledger{}
	if dir == "" {
		return l, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	l.path = filepath.Join(dir, ledgerFile)
	raw, err := os.ReadFile(l.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return l, nil
	case err != nil:
		return nil, fmt.Errorf("restart ledger: %w", err)
	}
	if err := json.Unmarshal(raw, &l.entries); err != nil {
		bad := l.path + ".bad"
		l.entries = nil
		if rerr := os.Rename(l.path, bad); rerr != nil {
			return l, fmt.Errorf("restart ledger %s is not valid (%v) and cannot be set aside: %w", l.path, err, rerr)
		}
		return l, fmt.Errorf("restart ledger %s is not valid (%w); moved to %s, starting a new one", l.path, err, bad)
	}
	return l, nil
}

// Add records e and writes the ledger out (atomically: a new file renamed
// over the old one).
func (l *Ledger) Add(e Entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, e)
	if len(l.entries) > ledgerSize {
		l.entries = append([]Entry(nil), l.entries[len(l.entries)-ledgerSize:]...)
	}
	if l.path == "" {
		return nil
	}
	raw, err := json.Marshal(l.entries)
	if err != nil {
		return err
	}
	tmp := l.path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o640); err != nil {
		return fmt.Errorf("restart ledger: %w", err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		return fmt.Errorf("restart ledger: %w", err)
	}
	return nil
}

// For returns the entries of a pod (by namespace and name, across its
// incarnations), oldest first.
func (l *Ledger) For(namespace, pod string) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Entry
	for _, e := range l.entries {
		if e.Namespace == namespace && e.Pod == pod {
			e.Failures = append([]Failure(nil), e.Failures...) // the caller's own
			out = append(out, e)
		}
	}
	return out
}
