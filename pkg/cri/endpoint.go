package cri

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"sigs.k8s.io/yaml"
)

const (
	// ConfigFileEnv names the variable crictl reads its config file's
	// path from.
	ConfigFileEnv = "CRI_CONFIG_FILE"
	// DefaultConfigFile is crictl's config file.
	DefaultConfigFile = "/etc/crictl.yaml"
)

// EndpointSource says where an endpoint came from, for messages that must
// tell a user which setting to change.
type EndpointSource string

const (
	FromFlag       EndpointSource = "--runtime-endpoint"
	FromEnv        EndpointSource = "$" + EndpointEnv
	FromConfigFile EndpointSource = "crictl config"
	FromDefault    EndpointSource = "default"
)

// Endpoint is a resolved runtime endpoint and what else crictl's config
// file set.
type Endpoint struct {
	Address string
	Source  EndpointSource
	// ConfigFile is the crictl config file read, if one was.
	ConfigFile string
	// Timeout is the config file's timeout (crictl's connect timeout), if
	// it sets one.
	Timeout time.Duration
}

// crictlConfig is the part of crictl's config file that concerns the
// runtime connection; crictl's other keys (image-endpoint, debug,
// pull-image-on-create, …) are accepted and not used.
type crictlConfig struct {
	RuntimeEndpoint string `json:"runtime-endpoint"`
	Timeout         int    `json:"timeout"`
}

// ResolveEndpoint finds the runtime endpoint exactly as crictl does: the
// flag, else $CONTAINER_RUNTIME_ENDPOINT, else runtime-endpoint in the
// config file (configFile, else $CRI_CONFIG_FILE, else /etc/crictl.yaml;
// a missing default file is not an error), else containerd's socket.
func ResolveEndpoint(flagValue, configFile string) (Endpoint, error) {
	var e Endpoint
	path, explicit := configFile, configFile != ""
	if path == "" {
		path, explicit = os.Getenv(ConfigFileEnv), os.Getenv(ConfigFileEnv) != ""
	}
	if path == "" {
		path = DefaultConfigFile
	}
	cfg, err := readCrictlConfig(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !explicit:
	case err != nil:
		return e, err
	default:
		e.ConfigFile = path
		if cfg.Timeout > 0 {
			e.Timeout = time.Duration(cfg.Timeout) * time.Second
		}
	}
	switch {
	case flagValue != "":
		e.Address, e.Source = flagValue, FromFlag
	case os.Getenv(EndpointEnv) != "":
		e.Address, e.Source = os.Getenv(EndpointEnv), FromEnv
	case cfg.RuntimeEndpoint != "":
		e.Address, e.Source = cfg.RuntimeEndpoint, FromConfigFile
	default:
		e.Address, e.Source = DefaultEndpoint, FromDefault
	}
	return e, nil
}

func readCrictlConfig(path string) (crictlConfig, error) {
	var cfg crictlConfig
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("crictl config: %w", err)
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return cfg, fmt.Errorf("crictl config %s: %w (fix the file, or point %s or --crictl-config at another)", path, err, ConfigFileEnv)
	}
	return cfg, nil
}
