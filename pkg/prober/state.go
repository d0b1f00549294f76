package prober

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/results"
)

// probeStateFile keeps, in the state directory, each probe's stable result
// and current run, so that an agent restart does not turn a ready container
// not ready (kubelet's #100277 family, KEP-4781).
const probeStateFile = "probes.json"

type savedProbe struct {
	ContainerID string `json:"containerId"`
	Type        string `json:"type"` // Liveness, Readiness or Startup
	results.Saved
}

func probeTypeNamed(name string) (results.ProbeType, bool) {
	for _, t := range results.ProbeTypes {
		if t.String() == name {
			return t, true
		}
	}
	return 0, false
}

// loadProbeState reads what a previous agent saved in dir. A file that
// cannot be read as such is set aside (*.bad) and reported; the agent then
// starts as kubelet does, from the initial values.
func loadProbeState(dir string) (map[results.Key]results.Saved, error) {
	path := filepath.Join(dir, probeStateFile)
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("probe state: %w", err)
	}
	var list []savedProbe
	if err := json.Unmarshal(raw, &list); err != nil {
		if rerr := os.Rename(path, path+".bad"); rerr != nil {
			return nil, fmt.Errorf("probe state %s is not valid (%v) and cannot be set aside: %w", path, err, rerr)
		}
		return nil, fmt.Errorf("probe state %s is not valid (%w); moved to %s.bad, starting from the initial values", path, err, path)
	}
	out := make(map[results.Key]results.Saved, len(list))
	for _, sp := range list {
		if t, ok := probeTypeNamed(sp.Type); ok {
			out[results.Key{ContainerID: sp.ContainerID, Type: t}] = sp.Saved
		}
	}
	return out, nil
}

// saveProbeState writes the store's state to dir (a new file renamed over
// the old one: never half written).
func saveProbeState(dir string, state map[results.Key]results.Saved) error {
	list := make([]savedProbe, 0, len(state))
	for k, sv := range state {
		list = append(list, savedProbe{ContainerID: k.ContainerID, Type: k.Type.String(), Saved: sv})
	}
	raw, err := json.Marshal(list)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(dir, probeStateFile)
	if err := os.WriteFile(path+".tmp", raw, 0o640); err != nil {
		return fmt.Errorf("probe state: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("probe state: %w", err)
	}
	return nil
}

// saveState writes the probes' state if it changed since the last write:
// results, and runs still below their threshold (steady probes write
// nothing).
func (m *Manager) saveState(logger klog.Logger) {
	if m.stateDir == "" {
		return
	}
	state := m.results.Export()
	if m.savedState != nil && maps.Equal(state, m.savedState) {
		return
	}
	if err := saveProbeState(m.stateDir, state); err != nil {
		logger.Error(err, "Cannot save the probes' state; an agent restart will start from the initial values")
		return
	}
	m.savedState = state
}

// restored returns what the previous agent saved for k (nil map: nothing).
func (m *Manager) restored(k results.Key) (results.Saved, bool) {
	sv, ok := m.restoredState[k]
	return sv, ok
}
