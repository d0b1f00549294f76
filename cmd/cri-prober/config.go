package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/cri-prober/cri-prober/pkg/eviction"
)

// applyConfig sets the flags of fs that the command line did not set from
// a YAML file whose keys are the flag names (without dashes). Precedence:
// defaults < config file < command line. An unknown key or a bad value is
// an error naming the file and the key: nothing given is ignored.
func applyConfig(fs *pflag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		return fmt.Errorf("config file %s: not a YAML mapping of flag names to values: %w", path, err)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		raw := values[key] // read under the file's key, kubelet's name or the flag's
		if key == "config" {
			return fmt.Errorf("config file %s: %q cannot be set in a config file", path, key)
		}
		f := fs.Lookup(key)
		if alias, ok := kubeletConfigNames[key]; ok && f == nil {
			f = fs.Lookup(alias)
			key = alias
		}
		if f == nil {
			return fmt.Errorf("config file %s: unknown key %q; the keys are run's flags: %s", path, key, strings.Join(flagNames(fs), ", "))
		}
		if f.Changed {
			continue
		}
		value, err := configValue(raw, strings.HasSuffix(f.Value.Type(), "Slice"), f.Value.Type() == langleMapType)
		if err != nil {
			return fmt.Errorf("config file %s: %s: %w", path, key, err)
		}
		if err := fs.Set(key, value); err != nil {
			return fmt.Errorf("config file %s: %s: invalid value %q (%s): %w", path, key, value, f.Usage, err)
		}
	}
	return nil
}

// kubeletConfigNames are kubelet's configuration file's names of the
// settings the agent shares with it, accepted beside the flag names: a
// kubelet user's staticPodPath works as it does there.
var kubeletConfigNames = map[string]string{
	"staticPodPath":               "static-pod-path",
	"podLogsDir":                  "pod-logs-dir",
	"clusterDNS":                  "cluster-dns",
	"clusterDomain":               "cluster-domain",
	"resolvConf":                  "resolv-conf",
	"cgroupsPerQOS":               "cgroups-per-qos",
	"evictionHard":                "eviction-hard",
	"containerLogMaxSize":         "container-log-max-size",
	"containerLogMaxFiles":        "container-log-max-files",
	"containerLogMaxWorkers":      "container-log-max-workers",
	"containerLogMonitorInterval": "container-log-monitor-interval",
	"imageGCHighThresholdPercent": "image-gc-high-threshold",
	"imageGCLowThresholdPercent":  "image-gc-low-threshold",
	"imageMinimumGCAge":           "image-minimum-gc-age",
	"imageMaximumGCAge":           "image-maximum-gc-age",
}

// configValue turns a YAML scalar into the text a flag parses: a list
// for a slice flag, a mapping for a langleMap (kubelet's evictionHard:
// {nodefs.available: 10%}).
func configValue(v any, list, mapping bool) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return fmt.Sprint(v), nil
	case float64:
		return json.Number(fmt.Sprint(v)).String(), nil
	case nil:
		return "", nil
	case []any:
		if !list {
			return "", fmt.Errorf("want a single value, got %T", v)
		}
		parts := make([]string, 0, len(v))
		for _, item := range v {
			s, err := configValue(item, false, false)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	case map[string]any:
		if !mapping {
			return "", fmt.Errorf("want a single value, got a mapping")
		}
		pairs := make(map[string]string, len(v))
		for k, item := range v {
			s, err := configValue(item, false, false)
			if err != nil {
				return "", fmt.Errorf("%s: %w", k, err)
			}
			if strings.ContainsAny(k, "<,") || strings.Contains(s, ",") {
				return "", fmt.Errorf("%s: %q: neither may hold < or ,", k, s)
			}
			pairs[k] = s
		}
		return eviction.FormatEvictionHard(pairs), nil
	default:
		return "", fmt.Errorf("want a single value, got %T", v)
	}
}

func flagNames(fs *pflag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "config" {
			names = append(names, f.Name)
		}
	})
	return names
}
