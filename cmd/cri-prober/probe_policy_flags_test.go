package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/agent"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/prober"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// The security review's repro: an annotation readiness probe fetching a
// cloud metadata token with its header. Aimed at another host (the node's
// loopback here, where the metadata service is mocked) it is refused by
// default, naming the flag that allows it, and never sent; aimed at its
// own pod, it runs, and what it fetched is not served by the API (kubelet
// keeps no success output), unless --keep-success-output keeps it.
func TestAnnotationProbesCannotFetchForEveryLocalUser(t *testing.T) {
	const tokenPath = "/computeMetadata/v1/instance/service-accounts/default/token"
	const token = "ya29.the-node-service-account-token"
	var asked atomic.Int32
	metadata := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == tokenPath && r.Header.Get("Metadata-Flavor") == "Google" {
			asked.Add(1)
			w.Write([]byte(`{"access_token":"` + token + `"}`))
		}
	}))
	defer metadata.Close()
	port := metadata.Listener.Addr().(*net.TCPAddr).Port
	probe := func(host string) string {
		hostField := ""
		if host != "" {
			hostField = `"host":"` + host + `",`
		}
		return `{"httpGet":{` + hostField + `"port":` + strconv.Itoa(port) + `,"path":"` + tokenPath + `","httpHeaders":[{"name":"Metadata-Flavor","value":"Google"}]},"periodSeconds":1}`
	}

	for _, tt := range []struct {
		name      string
		args      []string
		wantToken bool
		pinned    bool
	}{
		{"by default", nil, false, true},
		{"--keep-success-output", []string{"--keep-success-output"}, true, true},
		{"--annotation-probe-hosts=any", []string{"--annotation-probe-hosts=any"}, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			asked.Store(0)
			rt := fakeruntime.NewForTest(t)
			// The pod's own address is the mock's here: what it serves
			// stands for any pod's answer.
			own := rt.AddSandbox("ns", "own", "uid-own", fakeruntime.WithIP("127.0.0.1"))
			rt.AddContainer(own, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAnnotations(map[string]string{spec.ReadinessAnnotation: probe("")}))
			other := rt.AddSandbox("ns", "other", "uid-other", fakeruntime.WithIP("10.0.0.99"))
			rt.AddContainer(other, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAnnotations(map[string]string{spec.ReadinessAnnotation: probe("127.0.0.1")}))

			listen := freeLoopbackPort(t)
			runAgent(t, rt, append([]string{"--listen", listen}, tt.args...)...)
			get := func(path string) string {
				code, body, err := request(t, http.DefaultClient, "http://"+listen+path, "", "")
				if err != nil || code != http.StatusOK {
					return ""
				}
				return body
			}
			require.Eventually(t, func() bool {
				return strings.Contains(get("/api/v1/pods/ns/own/ready"), "true") && (tt.pinned || strings.Contains(get("/api/v1/pods/ns/other/ready"), "true"))
			}, 20*time.Second, 20*time.Millisecond, "ready")

			pods, ownHistory, otherHistory := get("/api/v1/pods"), get("/api/v1/pods/ns/own/history"), get("/api/v1/pods/ns/other/history")
			served := pods + ownHistory + otherHistory
			assert.Equal(t, tt.wantToken, strings.Contains(served, token), "the token served: %.2000s", served)
			if tt.pinned {
				assert.Contains(t, pods, `cri-prober.io/readiness-probe.httpGet.host: Forbidden: annotation probes go to their own pod`)
				assert.Contains(t, pods, "--annotation-probe-hosts=any")
				assert.NotContains(t, otherHistory, `"result"`, "the other pod's probe never ran")
			}
		})
	}
}

// runAgent runs `cri-prober run` against rt until the test ends.
func runAgent(t *testing.T, rt *fakeruntime.Runtime, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"run", "--runtime-endpoint", rt.Endpoint(), "--containerd-address", "none"}, args...), io.Discard, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// The policy's flags, from the command line or run's config file (a list
// for the destinations), and what they give the engine; a bad value is
// refused with the flag's name.
func TestProbePolicyFlags(t *testing.T) {
	parse := func(t *testing.T, config string, args ...string) (probePolicy, error) {
		t.Helper()
		var p probePolicy
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		p.register(fs)
		if err := fs.Parse(args); err != nil {
			return p, err
		}
		if config != "" {
			path := filepath.Join(t.TempDir(), "config.yaml")
			require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
			return p, applyConfig(fs, path)
		}
		return p, nil
	}

	p, err := parse(t, "")
	require.NoError(t, err)
	var cfg agent.Config
	p.apply(&cfg)
	assert.Equal(t, spec.AnnotationProbeHostsPod, cfg.Resolver.AnnotationProbeHosts, "pinned by default")
	assert.Empty(t, p.allowedDestinations, "nothing allowed by default")
	assert.False(t, p.keepSuccessOutput)
	assert.Equal(t, failureEvents(prober.FailureEventsKubelet), p.failureEvents, "kubelet's events by default")
	assert.Empty(t, cfg.Prober.AllowedDestinations, "the destinations only: none allowed")
	assert.Equal(t, prober.FailureEventsKubelet, cfg.Prober.FailureEvents, "no failure events option")
	assert.False(t, cfg.Prober.KeepSuccessOutput, "no success output option")

	p, err = parse(t, "", "--annotation-probe-hosts=any", "--allow-probe-destination", "169.254.169.254",
		"--allow-probe-destination", "fd00:ec2::254/128,100.100.100.0/24", "--keep-success-output", "--probe-failure-events=threshold")
	require.NoError(t, err)
	assert.Equal(t, prefixList{netip.MustParsePrefix("169.254.169.254/32"), netip.MustParsePrefix("fd00:ec2::254/128"), netip.MustParsePrefix("100.100.100.0/24")}, p.allowedDestinations)
	cfg = agent.Config{}
	p.apply(&cfg)
	assert.Equal(t, spec.AnnotationProbeHostsAny, cfg.Resolver.AnnotationProbeHosts)
	assert.Equal(t, []netip.Prefix(p.allowedDestinations), cfg.Prober.AllowedDestinations, "the destinations")
	assert.Equal(t, prober.FailureEventsThreshold, cfg.Prober.FailureEvents, "the failure events")
	assert.True(t, cfg.Prober.KeepSuccessOutput, "the success output")

	p, err = parse(t, "annotation-probe-hosts: any\nallow-probe-destination: [169.254.169.254/32, fe80::/10]\nkeep-success-output: true\nprobe-failure-events: threshold\n")
	require.NoError(t, err)
	assert.Equal(t, probeHosts(spec.AnnotationProbeHostsAny), p.annotationProbeHosts)
	assert.Equal(t, prefixList{netip.MustParsePrefix("169.254.169.254/32"), netip.MustParsePrefix("fe80::/10")}, p.allowedDestinations)
	assert.True(t, p.keepSuccessOutput)
	assert.Equal(t, failureEvents(prober.FailureEventsThreshold), p.failureEvents)

	_, err = parse(t, "", "--annotation-probe-hosts=all")
	assert.ErrorContains(t, err, `invalid argument "all" for "--annotation-probe-hosts" flag: Unsupported value: "all": supported values: "pod", "any"`)
	_, err = parse(t, "", "--allow-probe-destination=metadata")
	assert.ErrorContains(t, err, `"metadata" is not a CIDR (169.254.169.254/32) or an address`)
	_, err = parse(t, "", "--probe-failure-events=quiet")
	assert.ErrorContains(t, err, `invalid argument "quiet" for "--probe-failure-events" flag: "quiet": want kubelet`)
	_, err = parse(t, "probe-failure-events: loud\n")
	assert.ErrorContains(t, err, "probe-failure-events")
	_, err = parse(t, "annotation-probe-hosts: everywhere\n")
	assert.ErrorContains(t, err, "annotation-probe-hosts: invalid value")
}

// run --probe-failure-events=threshold, end to end over a fake runtime and
// a real HTTP target: the events API serves the failures below the
// threshold as ProbeFailureIgnored (Normal) and the one that reaches it as
// Unhealthy (Warning), each with its count.
func TestRunProbeFailureEventsThreshold(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer target.Close()
	port := target.Listener.Addr().(*net.TCPAddr).Port
	rt := fakeruntime.NewForTest(t)
	sb := rt.AddSandbox("ns", "web", "uid-web", fakeruntime.WithIP("127.0.0.1"))
	rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAnnotations(map[string]string{
		spec.ReadinessAnnotation: `{"httpGet":{"port":` + strconv.Itoa(port) + `,"path":"/"},"periodSeconds":1,"failureThreshold":3}`}))

	const listen = "127.0.0.1:9621" // in this worktree's port range
	runAgent(t, rt, "--listen", listen, "--probe-failure-events=threshold")
	type event struct {
		Type, Reason, Message string
		Count, Threshold      int
	}
	var got struct{ Events []event }
	var body string
	require.Eventually(t, func() bool {
		_, body, _ = request(t, http.DefaultClient, "http://"+listen+"/api/v1/events", "", "")
		got.Events = nil
		return json.Unmarshal([]byte(body), &got) == nil && slices.ContainsFunc(got.Events, func(e event) bool { return e.Reason == prober.ReasonUnhealthy })
	}, 20*time.Second, 50*time.Millisecond, "the threshold reached")
	var failures []string
	for _, e := range got.Events {
		if e.Threshold > 0 {
			failures = append(failures, fmt.Sprintf("%s %s %d/%d %s", e.Type, e.Reason, e.Count, e.Threshold, e.Message))
		}
	}
	require.GreaterOrEqual(t, len(failures), 3, "%s", body)
	assert.Equal(t, []string{
		"Normal ProbeFailureIgnored 1/3 Readiness probe failed (1/3, will be ignored): HTTP probe failed with statuscode: 500",
		"Normal ProbeFailureIgnored 2/3 Readiness probe failed (2/3, will be ignored): HTTP probe failed with statuscode: 500",
		"Warning Unhealthy 3/3 Readiness probe failed: HTTP probe failed with statuscode: 500",
	}, failures[:3])
}

// Every command that runs the engine takes --probe-failure-events, so that
// play and wait show the events run would make.
func TestProbeFailureEventsFlagWhereverTheEngineRuns(t *testing.T) {
	for _, cmd := range []string{"run", "play", "wait"} {
		out, _, err := runCLI(t, cmd, "--help")
		require.NoError(t, err)
		assert.Contains(t, out, "--probe-failure-events", cmd)
		_, errOut, err := runCLI(t, cmd, "--probe-failure-events=loud")
		assert.ErrorIs(t, err, errUsage, cmd)
		assert.Contains(t, errOut, `invalid argument "loud" for "--probe-failure-events" flag`, cmd)
	}
}
