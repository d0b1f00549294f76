package prober

import (
	"encoding/json"
	"fmt"
	"maps"

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

// probeStateFormat is the file's format: {"version":1,"probes":[...]}. A
// bare list (version 0, before the version was written) is read as well.
// Its size is bounded at about 100,000 probes. A file that cannot be read
// is set aside (pkg/statefile's policy) and probing starts as kubelet's
// does, from the initial values.
var probeStateFormat = statefile.Format{
	Name: probeStateFile, What: "probe state", Limit: 16 << 20, Version: 1,
	VersionOf: statefile.VersionField, Then: "starting from the initial values",
}

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
// 0700, if missing). A file that cannot be read is set aside and warning
// (a *statefile.Warning) says so; err: the directory cannot be used.
func loadProbeState(dir string) (state map[results.Key]results.Saved, warning, err error) {
	d, err := statefile.OpenDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("probe state: %w", err)
	}
	defer d.Close()
	var list []savedProbe
	found, warning, err := statefile.Load(d, &probeStateFormat, func(raw []byte, version int) error {
		if version == 0 {
			return json.Unmarshal(raw, &list)
		}
		var st probeState
		err := json.Unmarshal(raw, &st)
		list = st.Probes
		return err
	})
	if !found {
		return nil, warning, err
	}
	out := make(map[results.Key]results.Saved, len(list))
	for _, sp := range list {
		if t, ok := probeTypeNamed(sp.Type); ok {
			out[results.Key{ContainerID: sp.ContainerID, Type: t}] = sp.Saved
		}
	}
	return out, nil, nil
}

// saveProbeState writes the store's state to dir (a new file renamed over
// the old one: never half written, never through a link).
func saveProbeState(dir string, state map[results.Key]results.Saved) error {
	list := make([]savedProbe, 0, len(state))
	for k, sv := range state {
		list = append(list, savedProbe{ContainerID: k.ContainerID, Type: k.Type.String(), Saved: sv})
	}
	raw, err := json.Marshal(probeState{Version: probeStateFormat.Version, Probes: list})
	if err != nil {
		return err
	}
	d, err := statefile.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("probe state: %w", err)
	}
	defer d.Close()
	return statefile.Save(d, &probeStateFormat, raw)
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
