package prober

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"strconv"

	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/results"
	"github.com/cri-prober/cri-prober/pkg/statefile"
)

// probeStateFile keeps, in the state directory, each probe's stable result
// and current run, so that an agent restart does not turn a ready container
// not ready (kubelet's #100277 family, KEP-4781). It is written and read
// through pkg/statefile: never through a link, 0600 in a 0700 directory,
// replaced whole (fsynced) by each save.
const probeStateFile = "probes.json"

// probeStateVersion is the file's format: {"version":1,"probes":[...]}.
// A bare list (version 0, before the version was written) is read as well.
// A newer version is not read, and is set aside (probes.json.vN) rather
// than overwritten, for the newer agent it belongs to.
const probeStateVersion = 1

// maxProbeState bounds the file read (and written): about 100,000 probes.
const maxProbeState = 16 << 20

type probeState struct {
	Version int          `json:"version"`
	Probes  []savedProbe `json:"probes"`
}

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

// loadProbeState reads what a previous agent saved in dir (creating dir,
// 0700, if missing). A file that cannot be read as such (not valid, or
// refused: a link, not a regular file, too large) is set aside (*.bad), one
// of a newer format kept as *.vN, and the error says so; the agent then
// starts as kubelet does, from the initial values.
func loadProbeState(dir string) (map[results.Key]results.Saved, error) {
	d, err := statefile.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("probe state: %w", err)
	}
	defer d.Close()
	path := filepath.Join(d.Path(), probeStateFile)
	raw, err := d.ReadFile(probeStateFile, maxProbeState)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, statefile.ErrUnsafe):
		return nil, setAside(d, probeStateFile+".bad", fmt.Sprintf("probe state refused (%v)", err), "starting from the initial values")
	case err != nil:
		return nil, fmt.Errorf("probe state: %w", err)
	}
	list, version, err := decodeProbeState(raw)
	switch {
	case err != nil:
		return nil, setAside(d, probeStateFile+".bad", fmt.Sprintf("probe state %s is not valid (%v)", path, err), "starting from the initial values")
	case version > probeStateVersion:
		return nil, setAside(d, probeStateFile+".v"+strconv.Itoa(version),
			fmt.Sprintf("probe state %s has format version %d, newer than this agent's %d (a newer cri-prober wrote it)", path, version, probeStateVersion),
			"starting from the initial values")
	}
	out := make(map[results.Key]results.Saved, len(list))
	for _, sp := range list {
		if t, ok := probeTypeNamed(sp.Type); ok {
			out[results.Key{ContainerID: sp.ContainerID, Type: t}] = sp.Saved
		}
	}
	return out, nil
}

// decodeProbeState returns the probes of a file and its format version (a
// newer one's probes are not decoded).
func decodeProbeState(raw []byte) ([]savedProbe, int, error) {
	if trimmed := bytes.TrimLeft(raw, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		var list []savedProbe // version 0
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, 0, err
		}
		return list, 0, nil
	}
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, 0, err
	}
	switch {
	case head.Version < 1:
		return nil, 0, errors.New("no format version")
	case head.Version > probeStateVersion:
		return nil, head.Version, nil
	}
	var st probeState
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, 0, err
	}
	return st.Probes, st.Version, nil
}

// setAside renames d's probe state file to aside and returns an error
// saying why (what) and what follows (then), or that it could not.
func setAside(d *statefile.Dir, aside, what, then string) error {
	if err := d.Rename(probeStateFile, aside); err != nil {
		return fmt.Errorf("%s, and cannot be set aside: %w", what, err)
	}
	return fmt.Errorf("%s; moved to %s, %s", what, filepath.Join(d.Path(), aside), then)
}

// saveProbeState writes the store's state to dir (a new file renamed over
// the old one: never half written, never through a link).
func saveProbeState(dir string, state map[results.Key]results.Saved) error {
	list := make([]savedProbe, 0, len(state))
	for k, sv := range state {
		list = append(list, savedProbe{ContainerID: k.ContainerID, Type: k.Type.String(), Saved: sv})
	}
	raw, err := json.Marshal(probeState{Version: probeStateVersion, Probes: list})
	if err != nil {
		return err
	}
	if len(raw) > maxProbeState {
		return fmt.Errorf("probe state: %d probes take %d bytes, over the limit of %d", len(list), len(raw), maxProbeState)
	}
	d, err := statefile.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("probe state: %w", err)
	}
	defer d.Close()
	if err := d.WriteFile(probeStateFile, raw); err != nil {
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
