package cri

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crictl's precedence: flag, environment, config file, default.
func TestResolveEndpoint(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	crictl := write("crictl.yaml", "runtime-endpoint: unix:///run/k3s/containerd/containerd.sock\nimage-endpoint: unix:///x\ntimeout: 7\ndebug: false\n")
	empty := write("empty.yaml", "")
	bad := write("bad.yaml", "runtime-endpoint: [\n")
	missing := filepath.Join(dir, "missing.yaml")

	tests := []struct {
		name            string
		flag, env       string
		configFile      string
		configEnv       string
		want            string
		wantSource      EndpointSource
		wantTimeout     time.Duration
		wantErrContains string
	}{
		{name: "flag wins", flag: "unix:///flag.sock", env: "unix:///env.sock", configFile: crictl, want: "unix:///flag.sock", wantSource: FromFlag, wantTimeout: 7 * time.Second},
		{name: "environment over file", env: "unix:///env.sock", configFile: crictl, want: "unix:///env.sock", wantSource: FromEnv, wantTimeout: 7 * time.Second},
		{name: "config file", configFile: crictl, want: "unix:///run/k3s/containerd/containerd.sock", wantSource: FromConfigFile, wantTimeout: 7 * time.Second},
		{name: "config file from CRI_CONFIG_FILE", configEnv: crictl, want: "unix:///run/k3s/containerd/containerd.sock", wantSource: FromConfigFile, wantTimeout: 7 * time.Second},
		{name: "file without endpoint", configFile: empty, want: DefaultEndpoint, wantSource: FromDefault},
		{name: "named file missing", configFile: missing, wantErrContains: "missing.yaml"},
		{name: "bad file", configFile: bad, wantErrContains: "bad.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EndpointEnv, tt.env)
			t.Setenv(ConfigFileEnv, tt.configEnv)
			got, err := ResolveEndpoint(tt.flag, tt.configFile)
			if tt.wantErrContains != "" {
				require.ErrorContains(t, err, tt.wantErrContains)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Address)
			assert.Equal(t, tt.wantSource, got.Source)
			assert.Equal(t, tt.wantTimeout, got.Timeout)
		})
	}
}
