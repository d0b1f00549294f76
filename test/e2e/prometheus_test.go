//go:build e2e

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// These tests run a real Prometheus server (Debian's package, unpacked by
// hack/install-prometheus.sh) over real agents, with the shipped scrape
// configuration and rules (deploy/prometheus), and read its query API as
// an operator's dashboards and Alertmanager would.
//
// What the test changes of the shipped files, and how (prometheusConfig,
// renderRules): the targets and the files' paths (the agents here, their
// CA and password); the scrape and evaluation intervals (1 s); and in the
// rules, every alert's `for` (15m, 1h) to shortFor and every range
// selector's [5m] to shortRange, so that alerts fire and resolve in
// seconds. Nothing else: the jobs, their paths, TLS and basic auth, and
// the alerts' expressions are the shipped ones. The kubernetes-mixin's pod
// alerts are loaded beside them as docs/deployment.md says to run them,
// with only their job selector changed (testdata/kubernetes-mixin-pods.rules.yml),
// and shortened the same way.
const (
	shortFor   = "5s"
	shortRange = "[20s]"
)

var (
	prometheusBinary = os.Getenv("CRI_PROBER_E2E_PROMETHEUS")
	repoDir          = filepath.Join("..", "..")
)

// The Prometheus operator's password (basic auth) and its bcrypt hash
// (from exporter-toolkit's own tests: what `htpasswd -nBC 10` gives).
const (
	promPassword     = "dave123"
	promPasswordHash = "$2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq"
)

// fleetQuery is docs/deployment.md's "one query" over a fleet: every pod
// not ready or crash looping, with its node (kube_pod_info's), from the
// kube-state job of every agent.
const fleetQuery = `(
  label_replace(max by (job, instance, namespace, pod, uid) (max_over_time(kube_pod_container_status_waiting_reason{job="cri-prober-kube-state", reason="CrashLoopBackOff"}[1m])), "problem", "CrashLoopBackOff", "", "")
  or
  label_replace(max by (job, instance, namespace, pod, uid) (kube_pod_status_ready{job="cri-prober-kube-state", condition="false"} == 1), "problem", "NotReady", "", "")
)
* on (job, instance, namespace, pod, uid) group_left (node)
kube_pod_info{job="cri-prober-kube-state"}`

// Contract (issue 23, items 3 and 5): two agents on two nodes (node
// names; here one containerd, each agent making and reporting only its own
// pods), scraped by one real Prometheus with the shipped scrape config and
// rules. A real crash-looping container (exits 1, kubelet's back-off) and
// a real never-ready pod (its readiness probe fails) make the shipped
// PodCrashLooping and PodNotReady alerts fire, and the kubernetes-mixin's
// KubePodCrashLooping and KubePodNotReady too, with only their job
// selector changed; each says its node. One query shows the fleet's pods
// not ready and crash looping, by node. Once the crash-looping pod is
// fixed and the never-ready one removed, every alert resolves. Events,
// ledger entries and /api/v1/pods say the node too. Parallel, though its
// agents are processes that list the whole node: they take specs from
// manifests only (--spec-sources) and make pods only in their own
// namespaces, so other tests' pods are nothing to them, and theirs are in
// no other test's scope.
func TestPrometheusAlertsOnTwoNodes(t *testing.T) {
	parallel(t)
	require.NotEmpty(t, prometheusBinary, "CRI_PROBER_E2E_PROMETHEUS: run through hack/e2e.sh (hack/install-prometheus.sh provides it)")
	require.FileExists(t, binaryPath, "build it first (make build)")
	addrs := listenAddrs(t, 3)
	tlsDir := t.TempDir()
	auth := webConfig(t, tlsDir)

	nodeA := &promNode{name: "e2e-prom-a", namespace: "prom-a", listen: addrs[0]}
	nodeB := &promNode{name: "e2e-prom-b", namespace: "prom-b", listen: addrs[1]}
	for _, n := range []*promNode{nodeA, nodeB} {
		n.start(t, auth)
	}

	prom := startPrometheus(t, addrs[2], prometheusConfig(t, tlsDir, []string{nodeA.target(), nodeB.target()}))
	t.Log("Step 1: Prometheus scrapes both agents' jobs through the shipped config (TLS, basic auth)")
	eventually(t, 30*time.Second, "4 targets up (2 jobs × 2 agents)", func() bool {
		r, err := prom.query(`sum(up{job=~"cri-prober|cri-prober-kube-state"})`)
		return err == nil && len(r) == 1 && r[0].Value == "4"
	})
	r, err := prom.query(`cri_prober_build_info`)
	require.NoError(t, err)
	var nodes []string
	for _, s := range r {
		nodes = append(nodes, s.Metric["node"])
	}
	slices.Sort(nodes)
	assert.Equal(t, []string{nodeA.name, nodeB.name}, nodes, "cri_prober_build_info's node label")

	t.Log("Step 2: node A crash loops a container, node B runs a pod that is never ready")
	crash, unready := "crash", "unready"
	nodeA.write(t, crash, `
  - name: app
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["sh", "-c", "echo crashing; exit 1"]`)
	nodeB.write(t, unready, `
  - name: app
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["sleep", "3600"]
    readinessProbe:
      exec: {command: ["false"]}
      periodSeconds: 1`)
	crashPod, unreadyPod := crash+"-"+nodeA.name, unready+"-"+nodeB.name

	t.Log("Step 3: the alerts fire, each with its node")
	want := []firing{
		{"PodCrashLooping", crashPod, nodeA.name},
		{"PodNotReady", unreadyPod, nodeB.name},
		{"KubePodCrashLooping", crashPod, ""},
		{"KubePodNotReady", unreadyPod, ""},
	}
	eventually(t, 3*time.Minute, "the alerts firing", func() bool {
		alerts, err := prom.alerts()
		if err != nil {
			return false
		}
		for _, w := range want {
			if !slices.ContainsFunc(alerts, w.matches) {
				return false
			}
		}
		return true
	})
	firingQuery := `ALERTS{alertstate="firing", alertname=~"PodCrashLooping|PodNotReady|KubePodCrashLooping|KubePodNotReady"}`
	r, err = prom.query(firingQuery)
	require.NoError(t, err)
	t.Logf("query: %s\nanswer:\n%s", firingQuery, r)

	r, err = prom.query(fleetQuery)
	require.NoError(t, err)
	t.Logf("fleet query: %s\nanswer:\n%s", fleetQuery, r)
	rows := map[string]bool{}
	for _, s := range r {
		rows[s.Metric["node"]+" "+s.Metric["namespace"]+"/"+s.Metric["pod"]+" "+s.Metric["problem"]] = true
	}
	assert.True(t, rows[nodeA.name+" "+nodeA.namespace+"/"+crashPod+" CrashLoopBackOff"], "fleet: %v", rows)
	assert.True(t, rows[nodeB.name+" "+nodeB.namespace+"/"+unreadyPod+" NotReady"], "fleet: %v", rows)
	for row := range rows {
		assert.True(t, strings.HasPrefix(row, nodeA.name+" "+nodeA.namespace+"/") || strings.HasPrefix(row, nodeB.name+" "+nodeB.namespace+"/"),
			"each pod once, on its own node: %s", row)
	}

	t.Log("Step 4: what leaves each node names it: /api/v1/pods, events, ledger entries")
	var pods struct {
		Pods []struct{ Namespace, Name, Node string }
	}
	nodeA.get(t, "/api/v1/pods", &pods)
	i := slices.IndexFunc(pods.Pods, func(p struct{ Namespace, Name, Node string }) bool { return p.Name == crashPod })
	require.GreaterOrEqual(t, i, 0, "the crash-looping pod on node A")
	assert.Equal(t, nodeA.name, pods.Pods[i].Node)
	var evs struct {
		Events []struct{ Pod, Reason, ReportingController, ReportingInstance string }
	}
	nodeA.get(t, "/api/v1/events", &evs)
	require.NotEmpty(t, evs.Events)
	for _, e := range evs.Events {
		assert.Equal(t, "cri-prober", e.ReportingController, "%+v", e)
		assert.Equal(t, nodeA.name, e.ReportingInstance, "%+v", e)
	}
	var restarts struct {
		Restarts []struct{ Node, Cause string }
	}
	nodeA.get(t, "/api/v1/pods/"+nodeA.namespace+"/"+crashPod+"/restarts", &restarts)
	require.NotEmpty(t, restarts.Restarts, "the crash loop's restarts in the ledger")
	for _, e := range restarts.Restarts {
		assert.Equal(t, nodeA.name, e.Node)
		assert.Equal(t, "exit", e.Cause)
	}

	t.Log("Step 5: the crash-looping pod fixed, the never-ready one removed: every alert resolves")
	nodeA.write(t, crash, `
  - name: app
    image: localhost/busybox:test
    imagePullPolicy: Never
    command: ["sleep", "3600"]`)
	require.NoError(t, os.Remove(filepath.Join(nodeB.dir, unready+".yaml")))
	eventually(t, 3*time.Minute, "every alert resolved", func() bool {
		alerts, err := prom.alerts()
		return err == nil && !slices.ContainsFunc(alerts, func(a alert) bool {
			return a.Labels["pod"] == crashPod || a.Labels["pod"] == unreadyPod
		})
	})
	r, err = prom.query(firingQuery)
	require.NoError(t, err)
	t.Logf("query: %s\nanswer after the fix:\n%s", firingQuery, r)
	r, err = prom.query(`kube_pod_status_ready{job="cri-prober-kube-state", condition="true", pod="` + crashPod + `"}`)
	require.NoError(t, err)
	require.Len(t, r, 1, "the fixed pod (a new UID), once")
	assert.Equal(t, "1", r[0].Value, "the fixed pod is ready")
}

// firing is an alert expected to fire for a pod (on a node: "" for the
// mixin's, which have no node label).
type firing struct{ name, pod, node string }

func (f firing) matches(a alert) bool {
	return a.State == "firing" && a.Labels["alertname"] == f.name && a.Labels["pod"] == f.pod && (f.node == "" || a.Labels["node"] == f.node)
}

// promNode is an agent as a node of the fleet: its own name, static pod
// directory and namespace (--kube-state-namespaces: the agents share one
// containerd here, and each reports its own pods only).
type promNode struct {
	name, namespace, listen string
	dir, rootDir            string
	agent                   *runningAgent
	client                  *http.Client
}

func (n *promNode) target() string {
	_, port, _ := net.SplitHostPort(n.listen)
	return "localhost:" + port
}

// start runs `cri-prober run` for the node, serving TLS with basic auth
// (web.yml in auth) as the shipped scrape config expects, and makes the
// pods of its static pod directory; when the test ends their manifests
// are removed and the pods with them, then the agent is killed.
func (n *promNode) start(t *testing.T, auth promAuth) {
	t.Helper()
	n.dir, n.rootDir = t.TempDir(), t.TempDir()
	logsDir := t.TempDir()
	n.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: auth.pool}}}
	// Cleanups run last first: the pods removed while the agent runs, then
	// the agent killed (startProcess), then the root directory unmounted.
	t.Cleanup(func() {
		exec.Command("umount", "-R", "--lazy", n.rootDir).Run() //nolint:errcheck // nothing mounted is fine
	})
	n.agent = startProcess(t, "https://"+n.target(), binaryPath, "run", "--runtime-endpoint", endpoint, "--static-pod-path", n.dir, "--pod-manifests-interval", "200ms",
		"--listen", n.listen, "--node-name", n.name, "--root-dir", n.rootDir, "--pod-logs-dir", logsDir, "--cgroup-root", "/cri-prober-e2e",
		"--spec-sources", "manifests", "--kube-state-namespaces", n.namespace, "--web.config.file", auth.webConfig)
	t.Cleanup(func() {
		entries, _ := os.ReadDir(n.dir)
		for _, e := range entries {
			os.Remove(filepath.Join(n.dir, e.Name()))
		}
		gone := eventuallyQuiet(time.Minute, func() bool {
			var pods struct{ Pods []struct{ Namespace string } }
			if err := n.fetch("/api/v1/pods", &pods); err != nil {
				return false
			}
			return !slices.ContainsFunc(pods.Pods, func(p struct{ Namespace string }) bool { return p.Namespace == n.namespace })
		})
		if !gone {
			t.Errorf("cleanup: the pods of node %s were not removed", n.name)
		}
	})
	eventually(t, 10*time.Second, "agent "+n.name+" serving", func() bool {
		var pods struct{ Pods []any }
		return n.fetch("/api/v1/pods", &pods) == nil
	})
}

// write puts a pod's manifest into the node's static pod directory,
// atomically: the pod is named NAME-NODE, as kubelet names static pods.
func (n *promNode) write(t *testing.T, name, containers string) {
	t.Helper()
	text := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:%s\n",
		name, n.namespace, containers)
	tmp := filepath.Join(n.dir, "."+name+".yaml")
	require.NoError(t, os.WriteFile(tmp, []byte(text), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(n.dir, name+".yaml")))
}

func (n *promNode) fetch(path string, v any) error {
	req, err := http.NewRequest(http.MethodGet, n.agent.server+path, nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth("prometheus", promPassword)
	resp, err := n.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (n *promNode) get(t *testing.T, path string, v any) {
	t.Helper()
	require.NoError(t, n.fetch(path, v))
}

// listenAddrs are n loopback addresses to listen on: from
// CRI_PROBER_E2E_PORTS (FIRST-LAST, a range reserved for this run) when
// set, else ports the kernel has free now.
func listenAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	if r := os.Getenv("CRI_PROBER_E2E_PORTS"); r != "" {
		first, last, ok := strings.Cut(r, "-")
		lo, err1 := strconv.Atoi(first)
		hi, err2 := strconv.Atoi(last)
		require.True(t, ok && err1 == nil && err2 == nil && hi-lo+1 >= n, "CRI_PROBER_E2E_PORTS=%s: want FIRST-LAST, at least %d ports", r, n)
		for p := lo; p < lo+n; p++ {
			out = append(out, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		}
		return out
	}
	for range n {
		out = append(out, freePort(t))
	}
	return out
}

// promAuth are the agents' web configuration (TLS and basic auth) and
// the CA that Prometheus and the test trust.
type promAuth struct {
	webConfig string
	pool      *x509.CertPool
}

// webConfig writes, into dir, what the shipped scrape config reads
// (cri-prober-ca.crt, cri-prober.password) and the agents' web
// configuration: a certificate for localhost, and the user prometheus.
func webConfig(t *testing.T, dir string) promAuth {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	files := map[string]string{
		"cri-prober-ca.crt":   string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		"cri-prober.key":      string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})),
		"cri-prober.password": promPassword,
		"web.yml": fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  prometheus: %s\n",
			filepath.Join(dir, "cri-prober-ca.crt"), filepath.Join(dir, "cri-prober.key"), promPasswordHash),
	}
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	return promAuth{webConfig: filepath.Join(dir, "web.yml"), pool: pool}
}

// prometheusConfig renders the shipped deploy/prometheus/prometheus.yml
// for the test: the targets, the paths of the CA and password (in dir),
// 1 s intervals, and the rules rendered by renderRules (the shipped ones,
// and the mixin's); everything else as shipped.
func prometheusConfig(t *testing.T, dir string, targets []string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoDir, "deploy", "prometheus", "prometheus.yml"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &cfg))
	cfg["global"] = map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"}
	cfg["rule_files"] = []string{
		renderRules(t, filepath.Join(repoDir, "deploy", "prometheus", "cri-prober.rules.yml"), filepath.Join(dir, "cri-prober.rules.yml")),
		renderRules(t, filepath.Join("testdata", "kubernetes-mixin-pods.rules.yml"), filepath.Join(dir, "kubernetes-mixin-pods.rules.yml")),
	}
	jobs, _ := cfg["scrape_configs"].([]any)
	require.Len(t, jobs, 2, "the shipped jobs: cri-prober and cri-prober-kube-state")
	for _, j := range jobs {
		job := j.(map[string]any)
		job["static_configs"] = []any{map[string]any{"targets": targets}}
		job["basic_auth"].(map[string]any)["password_file"] = filepath.Join(dir, "cri-prober.password")
		job["tls_config"].(map[string]any)["ca_file"] = filepath.Join(dir, "cri-prober-ca.crt")
	}
	out, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	path := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	return path
}

var rangeSelector = regexp.MustCompile(`\[5m\]`)

// renderRules writes the rule file src to dst with every alert's `for`
// made shortFor and every [5m] range made shortRange (the test's only
// change to the rules), and returns dst.
func renderRules(t *testing.T, src, dst string) string {
	t.Helper()
	raw, err := os.ReadFile(src)
	require.NoError(t, err)
	var rf map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &rf))
	for _, g := range rf["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			if _, ok := rule["for"]; ok {
				rule["for"] = shortFor
			}
			rule["expr"] = rangeSelector.ReplaceAllString(rule["expr"].(string), shortRange)
		}
	}
	out, err := yaml.Marshal(rf)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, out, 0o600))
	return dst
}

// promServer is a Prometheus server run for one test.
type promServer struct {
	url string
}

// startPrometheus runs Prometheus's server with config on listen and a
// data directory of its own; when the test ends, it is stopped by its PID
// and its data directory removed, pass or fail.
func startPrometheus(t *testing.T, listen, config string) *promServer {
	t.Helper()
	data := t.TempDir()
	logs := &lockedBuffer{}
	cmd := exec.Command(prometheusBinary, "--config.file="+config, "--storage.tsdb.path="+data, "--web.listen-address="+listen,
		"--storage.tsdb.retention.time=1h", "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	diesWithTheTest(cmd)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck // already gone is fine
		cmd.Wait()         //nolint:errcheck // killed
		os.RemoveAll(data)
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs)
		}
	})
	p := &promServer{url: "http://" + listen}
	eventually(t, 30*time.Second, "prometheus ready", func() bool {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// sample is one series of an instant query's answer.
type sample struct {
	Metric map[string]string
	Value  string
}

type samples []sample

func (s samples) String() string {
	if len(s) == 0 {
		return "  (no series)\n"
	}
	var b strings.Builder
	for _, x := range s {
		names := make([]string, 0, len(x.Metric))
		for k := range x.Metric {
			names = append(names, k)
		}
		slices.Sort(names)
		pairs := make([]string, 0, len(names))
		for _, k := range names {
			pairs = append(pairs, k+"="+strconv.Quote(x.Metric[k]))
		}
		fmt.Fprintf(&b, "  {%s} %s\n", strings.Join(pairs, ", "), x.Value)
	}
	return b.String()
}

// query runs an instant query (/api/v1/query).
func (p *promServer) query(q string) (samples, error) {
	var answer struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := p.get("/api/v1/query?query="+url.QueryEscape(q), &answer); err != nil {
		return nil, err
	}
	if answer.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, answer.Error)
	}
	out := samples{}
	for _, r := range answer.Data.Result {
		v, _ := r.Value[1].(string)
		out = append(out, sample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// alert is one of /api/v1/alerts.
type alert struct {
	Labels map[string]string
	State  string
}

// alerts are the alerts pending or firing now (/api/v1/alerts).
func (p *promServer) alerts() ([]alert, error) {
	var answer struct {
		Data struct{ Alerts []alert }
	}
	err := p.get("/api/v1/alerts", &answer)
	return answer.Data.Alerts, err
}

func (p *promServer) get(path string, v any) error {
	resp, err := http.Get(p.url + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return json.Unmarshal(body, v)
}
