package main

import (
	"fmt"
	"maps"

	"github.com/spf13/pflag"

	"github.com/cri-prober/cri-prober/pkg/eviction"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// storageFlags are the local storage settings of the pods the agent
// makes, under kubelet's names where kubelet has one.
type storageFlags struct {
	localStorageLimits string
	evictionHard       langleMap
}

func (f *storageFlags) register(fs *pflag.FlagSet) {
	f.evictionHard = langleMap{pairs: eviction.DefaultEvictionHard}
	fs.StringVar(&f.localStorageLimits, "local-storage-limits", spec.LocalStorageIgnore, "what the pods the agent makes get for an emptyDir's sizeLimit and a container's ephemeral-storage limit: ignore (kubelet's outcome: it never evicts a static pod, so they bind nothing; each is a warning naming its field) or enforce (the pod is evicted past them as kubelet evicts a pod that is not critical: Failed, reason Evicted, its containers stopped; checked every 10s, an emptyDir's usage measured at most once a minute, as kubelet's volume stats)")
	fs.Var(&f.evictionHard, "eviction-hard", "kubelet's hard eviction thresholds (signal<value, comma-separated; kubelet's defaults; as kubelet's, the first use replaces the defaults and a repeated flag adds to it): under nodefs (the filesystem of --root-dir) or imagefs (the runtime's image filesystem) pressure, the node's DiskPressure condition is set and dead containers and unused images are collected first, as kubelet does; no static pod is evicted for it, as under kubelet; memory and pid signals are accepted and bind nothing")
}

// check validates the values before anything is started.
func (f *storageFlags) check() ([]eviction.Threshold, error) {
	switch f.localStorageLimits {
	case spec.LocalStorageIgnore, spec.LocalStorageEnforce:
	default:
		return nil, fmt.Errorf("--local-storage-limits %q: want %s or %s", f.localStorageLimits, spec.LocalStorageIgnore, spec.LocalStorageEnforce)
	}
	th, err := eviction.ParseThresholds(f.evictionHard.pairs)
	if err != nil {
		return nil, fmt.Errorf("--eviction-hard: %w", err)
	}
	return th, nil
}

// apply gives eviction the settings (check first).
func (f *storageFlags) apply(cfg *eviction.Config, thresholds []eviction.Threshold) {
	cfg.LocalStorageLimits, cfg.EvictionHard = f.localStorageLimits, thresholds
}

// langleMap is kubelet's LangleSeparatedMapStringString: a flag of
// "key<value" pairs separated by commas; its first use replaces the
// defaults, and each later one adds its pairs to the map (a key given
// again takes the later value).
type langleMap struct {
	pairs map[string]string
	set   bool // the flag was used: the defaults are gone
}

// langleMapType is its pflag type name: a config file gives it as a map.
const langleMapType = "langleMap"

func (m *langleMap) String() string { return eviction.FormatEvictionHard(m.pairs) }

func (m *langleMap) Set(s string) error {
	v, err := eviction.ParseEvictionHard(s)
	if err != nil {
		return err
	}
	if !m.set || m.pairs == nil {
		m.pairs, m.set = map[string]string{}, true
	}
	maps.Copy(m.pairs, v)
	return nil
}

func (m *langleMap) Type() string { return langleMapType }
