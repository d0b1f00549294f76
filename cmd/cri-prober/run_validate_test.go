package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/api"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/imagegc"
	"github.com/cri-prober/cri-prober/pkg/logs"
	"github.com/cri-prober/cri-prober/pkg/restart"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// badRunFlags are values run refuses, each with what its error names.
var badRunFlags = []struct {
	name string
	args []string
	want string
}{
	{"manifests interval", []string{"--pod-manifests-interval=0s"}, "--pod-manifests-interval must be positive"},
	{"probe network", []string{"--probe-network=host"}, "--probe-network:"},
	{"restart mode", []string{"--restart=sometimes"}, `--restart: restart mode "sometimes"`},
	{"probe metrics", []string{"--probe-metrics=all"}, "--probe-metrics:"},
	{"local storage limits", []string{"--local-storage-limits=strict"}, `--local-storage-limits "strict": want ignore or enforce`},
	{"eviction signal", []string{"--eviction-hard=disk.available<10%"}, "--eviction-hard: unsupported eviction signal disk.available"},
	{"spec sources", []string{"--spec-sources=manifest"}, `--spec-sources: unknown source "manifest"`},
	{"manifests left out", []string{"--spec-sources=annotations", "--pod-manifests=/etc/cri-prober/pods"}, "--pod-manifests is set but --spec-sources leaves manifests out"},
	{"restart period", []string{"--max-container-restart-period=0s"}, "--max-container-restart-period 0s"},
	{"sync frequency", []string{"--sync-frequency=1ms"}, "--sync-frequency 1ms"},
	{"kill budget", []string{"--kill-budget=-1"}, "--kill-budget and --pod-kill-budget"},
	{"kill budget interval", []string{"--kill-budget=1", "--kill-budget-interval=0s"}, "--kill-budget-interval 0s"},
	{"node named twice", []string{"--node-name=a", "--hostname-override=b"}, `--node-name "a" and --hostname-override "b" name the node twice`},
	{"static pods without recreate", []string{"--static-pod-path=/etc/kubernetes/manifests", "--restart=none"}, "--static-pod-path makes the agent the pods' kubelet"},
	{"static pods' cluster DNS", []string{"--static-pod-path=/etc/kubernetes/manifests", "--cluster-dns=dns"}, `--cluster-dns "dns": not an IP address`},
	{"static pods' cgroup root", []string{"--static-pod-path=/etc/kubernetes/manifests", "--cgroup-root=kubepods"}, `--cgroup-root "kubepods"`},
	{"image GC high threshold", []string{"--image-gc-high-threshold=101"}, "invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive"},
	{"image GC low threshold", []string{"--image-gc-low-threshold=85"}, "invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 85 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 85"},
	{"image minimum GC age", []string{"--image-minimum-gc-age=-1s"}, "invalid configuration: imageMinimumGCAge (--image-minimum-gc-age) -1s must not be negative"},
	{"image maximum GC age", []string{"--image-maximum-gc-age=1m"}, "invalid configuration: imageMaximumGCAge (--image-maximum-gc-age) 1m0s must be greater than imageMinimumGCAge (--image-minimum-gc-age) 2m0s"},
	{"probes in flight", []string{"--max-probes-in-flight=-1"}, "--max-probes-in-flight must be 0 (no bound) or positive"},
	{"exec per pod", []string{"--max-concurrent-exec-per-pod=-1"}, "--max-concurrent-exec-per-pod must be 0 (no limit) or positive"},
	{"webhook", []string{"--webhook=ftp://example.com/hook"}, "--webhook ftp://example.com/hook: want an http:// or https:// URL"},
	{"max connections", []string{"--web.max-connections=0"}, "--web.max-connections and --web.max-event-streams must be positive"},
	{"max event streams", []string{"--web.max-event-streams=0"}, "--web.max-connections and --web.max-event-streams must be positive"},
	{"streams above connections", []string{"--web.max-event-streams=128"}, "--web.max-event-streams (128) must be below --web.max-connections (128)"},
	{"allowed hosts", []string{"--web.allowed-hosts=a/b"}, `--web.allowed-hosts: "a/b" is not a host name`},
	{"web config file", []string{"--web.config.file=/nonexistent/web.yml"}, "--web.config.file /nonexistent/web.yml"},
	{"listen address", []string{"--listen=unix://relative.sock"}, "--listen \"unix://relative.sock\": want unix:// and an absolute path"},
	{"listen port", []string{"--listen=127.0.0.1"}, "--listen \"127.0.0.1\": want host:port"},
	{"container log max size", []string{"--container-log-max-size=ten"}, `--container-log-max-size: failed to parse container log max size "ten"`},
	{"container log max size 0", []string{"--container-log-max-size=0"}, "--container-log-max-size: invalid configuration: containerLogMaxSize 0 would rotate every log file"},
	{"container log max files", []string{"--container-log-max-files=1"}, "--container-log-max-files: invalid configuration: containerLogMaxFiles must be greater than 1"},
	{"container log max files bound", []string{"--container-log-max-files=1025"}, "--container-log-max-files: invalid configuration: containerLogMaxFiles must be at most 1024"},
	{"container log max workers", []string{"--container-log-max-workers=0"}, "--container-log-max-workers: invalid configuration: containerLogMaxWorkers must be greater than or equal to 1"},
	{"container log monitor interval", []string{"--container-log-monitor-interval=1s"}, "--container-log-monitor-interval: invalid configuration: containerLogMonitorInterval must be a positive time duration greater than or equal to 3s"},
	{"container log monitor interval", []string{"--container-log-monitor-interval=1s"}, "containerLogMonitorInterval must be a positive time duration greater than or equal to 3s"},
	{"container log link dir", []string{"--container-log-link-dir=var/log/containers"}, "--container-log-link-dir: the link directory"},
	{"profiling on TCP", []string{"--listen=127.0.0.1:9440", "--profiling"}, "--profiling serves the agent's internals"},
}

// validate refuses each bad value with an error that names its flag,
// from the flags alone.
func TestRunValidate(t *testing.T) {
	for _, tt := range badRunFlags {
		t.Run(tt.name, func(t *testing.T) {
			var o runOptions
			require.NoError(t, newRunCommand(&o).Flags().Parse(tt.args))
			_, err := o.validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// The defaults are valid, and each setting reaches its one field of the
// engine's config.
func TestRunValidateMakesTheEngineConfig(t *testing.T) {
	var o runOptions
	require.NoError(t, newRunCommand(&o).Flags().Parse([]string{"--node-name=node1", "--state-dir=/var/lib/cri-prober",
		"--max-probes-in-flight=7", "--max-concurrent-exec-per-pod=2", "--kill-budget=3", "--sync-frequency=4s",
		"--webhook=https://example.com/hook", "--spec-sources=manifests", "--web.max-event-streams=5"}))
	cfg, err := o.validate()
	require.NoError(t, err)
	assert.Equal(t, "node1", cfg.NodeName)
	assert.Equal(t, restart.Recreate, cfg.Restart.Mode)
	assert.Equal(t, "/var/lib/cri-prober", cfg.StateDir)
	assert.Equal(t, 7, cfg.Prober.MaxProbesInFlight)
	assert.Equal(t, 2, cfg.Exec.PerPodConcurrency)
	assert.Equal(t, 3, cfg.KillBudget.Node)
	assert.Equal(t, "4s", cfg.Restart.SyncFrequency.String())
	assert.Equal(t, restart.DefaultMaxBackoff, cfg.Restart.MaxContainerRestartPeriod)
	assert.Equal(t, logs.Config{MaxSize: 10 << 20, MaxFiles: 5, MaxWorkers: 1, MonitorInterval: 10 * time.Second, LinkDir: "/var/log/containers"}, cfg.ContainerLogs, "kubelet's defaults")
	o = runOptions{}
	require.NoError(t, newRunCommand(&o).Flags().Parse([]string{"--max-probes-in-flight=0"}))
	unbounded, err := o.validate()
	require.NoError(t, err)
	assert.Negative(t, unbounded.Prober.MaxProbesInFlight, "--max-probes-in-flight=0 is no bound, as its help says (it was the default, 512)")
	assert.Equal(t, "https://example.com/hook", cfg.Webhook)
	assert.True(t, cfg.Resolver.IgnoreAnnotations)
	assert.True(t, cfg.NotifySystemd)
	assert.Nil(t, cfg.Client, "nothing dialled")
	require.NotNil(t, cfg.API)
	assert.Equal(t, "127.0.0.1:9440", cfg.API.Serve.Address)
	assert.Equal(t, api.DefaultMaxConnections, cfg.API.Serve.MaxConnections)
	assert.Equal(t, 5, cfg.API.MaxEventStreams)

	o = runOptions{}
	require.NoError(t, newRunCommand(&o).Flags().Parse([]string{"--node-name=node1", "--listen="}))
	cfg, err = o.validate()
	require.NoError(t, err)
	assert.Nil(t, cfg.API, "no API without --listen")
	assert.Nil(t, cfg.ImageGC, "no image garbage collection when the agent makes no pods")
}

// Image garbage collection runs with the pods the agent makes, with
// kubelet's defaults, or the flags' (kubelet's deprecated name too), or
// the config file's keys under kubelet's names.
func TestRunImageGC(t *testing.T) {
	static := []string{"--node-name=node1", "--static-pod-path=/etc/kubernetes/manifests"}
	var o runOptions
	require.NoError(t, newRunCommand(&o).Flags().Parse(static))
	cfg, err := o.validate()
	require.NoError(t, err)
	assert.Equal(t, &imagegc.Config{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}, cfg.ImageGC)

	o = runOptions{}
	require.NoError(t, newRunCommand(&o).Flags().Parse(append(static, "--image-gc-high-threshold=90", "--image-gc-low-threshold=70",
		"--minimum-image-ttl-duration=1m", "--image-maximum-gc-age=1h")))
	cfg, err = o.validate()
	require.NoError(t, err)
	assert.Equal(t, &imagegc.Config{HighThresholdPercent: 90, LowThresholdPercent: 70, MinAge: time.Minute, MaxAge: time.Hour}, cfg.ImageGC)

	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte("imageGCHighThresholdPercent: 95\nimageGCLowThresholdPercent: 50\nimageMinimumGCAge: 30s\nimageMaximumGCAge: 24h\n"), 0o600))
	o = runOptions{}
	cmd := newRunCommand(&o)
	require.NoError(t, cmd.Flags().Parse(static))
	require.NoError(t, applyConfig(cmd.Flags(), file))
	cfg, err = o.validate()
	require.NoError(t, err)
	assert.Equal(t, &imagegc.Config{HighThresholdPercent: 95, LowThresholdPercent: 50, MinAge: 30 * time.Second, MaxAge: 24 * time.Hour}, cfg.ImageGC)
}

// A bad flag stops run before it dials the runtime, opens the state
// directory or binds a port: an unreachable endpoint still gives the
// flag's usage error, and a reachable one is never called.
func TestRunChecksEveryFlagBeforeItActs(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	for _, endpoint := range []string{"unix://" + filepath.Join(t.TempDir(), "nothing.sock"), rt.Endpoint()} {
		for _, tt := range badRunFlags {
			t.Run(tt.name, func(t *testing.T) {
				var stderr bytes.Buffer
				ctx := klog.NewContext(context.Background(), logr.Discard())
				args := append([]string{"run", "--runtime-endpoint", endpoint, "--containerd-address", "none", "--state-dir", stateDir}, tt.args...)
				err := run(ctx, args, io.Discard, &stderr)
				report(err, &stderr) // what main prints
				require.ErrorIs(t, err, errUsage, stderr.String())
				assert.Contains(t, stderr.String(), tt.want)
			})
		}
	}
	assert.Zero(t, rt.Calls("Version"), "the runtime was dialled")
	assert.NoDirExists(t, stateDir, "the state directory was opened")

	// The count would have seen a dial: Dial asks the runtime's version.
	client, err := cri.Dial(context.Background(), rt.Endpoint())
	require.NoError(t, err)
	client.Close()
	assert.Equal(t, 1, rt.Calls("Version"))
}

// --local-storage-limits and --eviction-hard reach the eviction's config
// with kubelet's defaults; kubelet's config file gives evictionHard as a
// mapping.
func TestRunStorageFlags(t *testing.T) {
	var o runOptions
	require.NoError(t, newRunCommand(&o).Flags().Parse([]string{"--node-name=node1"}))
	cfg, err := o.validate()
	require.NoError(t, err)
	assert.Equal(t, spec.LocalStorageIgnore, cfg.Eviction.LocalStorageLimits, "kubelet's outcome for a static pod")
	var thresholds []string
	for _, th := range cfg.Eviction.EvictionHard {
		thresholds = append(thresholds, th.String())
	}
	assert.Equal(t, []string{"imagefs.available<15%", "imagefs.inodesFree<5%", "memory.available<100Mi", "nodefs.available<10%", "nodefs.inodesFree<5%"}, thresholds, "kubelet's defaults")

	o = runOptions{}
	fs := newRunCommand(&o).Flags()
	require.NoError(t, fs.Parse([]string{"--node-name=node1", "--local-storage-limits=enforce"}))
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("evictionHard:\n  nodefs.available: 5%\n  imagefs.available: 1Gi\n"), 0o644))
	require.NoError(t, applyConfig(fs, path))
	cfg, err = o.validate()
	require.NoError(t, err)
	assert.Equal(t, spec.LocalStorageEnforce, cfg.Eviction.LocalStorageLimits)
	thresholds = nil
	for _, th := range cfg.Eviction.EvictionHard {
		thresholds = append(thresholds, th.String())
	}
	assert.Equal(t, []string{"imagefs.available<1Gi", "nodefs.available<5%"}, thresholds, "the file's map replaces the defaults, as kubelet's evictionHard")

	o = runOptions{}
	require.NoError(t, newRunCommand(&o).Flags().Parse([]string{"--node-name=node1", "--eviction-hard=nodefs.available<5%,imagefs.available<2Gi",
		"--eviction-hard=imagefs.available<1Gi", "--eviction-hard=nodefs.inodesFree<1%"}))
	cfg, err = o.validate()
	require.NoError(t, err)
	thresholds = nil
	for _, th := range cfg.Eviction.EvictionHard {
		thresholds = append(thresholds, th.String())
	}
	assert.Equal(t, []string{"imagefs.available<1Gi", "nodefs.available<5%", "nodefs.inodesFree<1%"}, thresholds,
		"kubelet's langle map flag: the first use clears the defaults, later ones merge, a key again takes the later value")
}

// kubelet's config file keys of the container log settings set run's
// flags.
func TestRunContainerLogConfigKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("containerLogMaxSize: 1Mi\ncontainerLogMaxFiles: 3\ncontainerLogMaxWorkers: 2\ncontainerLogMonitorInterval: 3s\n"), 0o600))
	var o runOptions
	cmd := newRunCommand(&o)
	require.NoError(t, cmd.Flags().Parse([]string{"--container-log-link-dir="}))
	require.NoError(t, applyConfig(cmd.Flags(), path))
	cfg, err := o.validate()
	require.NoError(t, err)
	assert.Equal(t, logs.Config{MaxSize: 1 << 20, MaxFiles: 3, MaxWorkers: 2, MonitorInterval: 3 * time.Second}, cfg.ContainerLogs)
}
