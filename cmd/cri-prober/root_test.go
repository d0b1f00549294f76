package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Completion scripts for the shells kubectl and crictl complete in.
func TestCompletionScripts(t *testing.T) {
	for shell, marker := range map[string]string{
		"bash": "__start_cri-prober",
		"zsh":  "#compdef cri-prober",
		"fish": "complete -c cri-prober",
	} {
		t.Run(shell, func(t *testing.T) {
			out, _, err := runCLI(t, "completion", shell)
			require.NoError(t, err)
			assert.Contains(t, out, marker)
		})
	}
	// The shell asks the binary itself: -o's formats come back.
	out, _, err := runCLI(t, "__complete", "status", "-o", "")
	require.NoError(t, err)
	for _, format := range readFormats {
		assert.Contains(t, out, format+"\n")
	}
}

// Every command has a man page, generated from the command itself.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	_, _, err := runCLI(t, "gen-docs", "--man", dir, "--markdown", filepath.Join(dir, "md"))
	require.NoError(t, err)
	root := newRootCommand()
	for _, cmd := range root.Commands() {
		if !cmd.IsAvailableCommand() || cmd.Name() == "help" {
			continue
		}
		page, err := os.ReadFile(filepath.Join(dir, "cri-prober-"+cmd.Name()+".1"))
		require.NoError(t, err, "man page of %s", cmd.Name())
		assert.Contains(t, string(page), `.TH "CRI-PROBER"`)
		assert.Contains(t, string(page), strings.ReplaceAll(cmd.Short, "-", `\-`)[:20], "its summary")
		_, err = os.Stat(filepath.Join(dir, "md", "cri-prober_"+cmd.Name()+".md"))
		assert.NoError(t, err)
	}
}

// Pods are named as kubectl names them: NAMESPACE/NAME, or NAME with -n
// (default "default"); the two ways must agree.
func TestPodRef(t *testing.T) {
	tests := []struct {
		arg, namespace string
		wantNS, want   string
		wantErr        string
	}{
		{arg: "shop/web", wantNS: "shop", want: "web"},
		{arg: "web", namespace: "shop", wantNS: "shop", want: "web"},
		{arg: "web", wantNS: "default", want: "web"},
		{arg: "shop/web", namespace: "shop", wantNS: "shop", want: "web"},
		{arg: "shop/web", namespace: "other", wantErr: `is in namespace "shop" but -n says "other"`},
		{arg: "/web", wantErr: "want NAMESPACE/NAME"},
		{arg: "shop/", wantErr: "want NAMESPACE/NAME"},
		{arg: "a/b/c", wantErr: "want NAMESPACE/NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.arg+" -n "+tt.namespace, func(t *testing.T) {
			r := podRef{namespace: tt.namespace}
			ns, name, err := r.parse(newHistoryCommand(), tt.arg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.ErrorIs(t, err, errUsage)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantNS, ns)
			assert.Equal(t, tt.want, name)
		})
	}
}

// validate as a user runs it on a directory that holds more than
// manifests, on a manifest with a duplicate key, and on crictl's own
// configs, offline; explain with the app's start time.
func TestValidateWhatUsersHave(t *testing.T) {
	dir := usersManifestDir(t)
	out, _, err := runCLI(t, "validate", dir)
	assert.ErrorIs(t, err, errProblemsFound, out)
	assert.Contains(t, out, "skipped "+filepath.Join(dir, "README.md")+": not a manifest (.md)")
	assert.Contains(t, out, "web.yaml:11: ")
	assert.Contains(t, out, `duplicate key "periodSeconds" (first at line 10)`)

	out, _, err = runCLI(t, "validate", "../../pkg/spec/testdata/cri/good-container.json", "../../pkg/spec/testdata/cri/good-sandbox.json")
	require.NoError(t, err, out)
	assert.Contains(t, out, "ok: 0 valid pod(s), 2 valid CRI config(s)")
	out, _, err = runCLI(t, "validate", "../../pkg/spec/testdata/cri/bad-container.json")
	assert.ErrorIs(t, err, errProblemsFound)
	assert.Contains(t, out, "bad-container.json:5: ", "the line of the annotation's value")

	pod := writeFile(t, dir, "slow.yaml", `apiVersion: v1
kind: Pod
metadata: {name: slow, namespace: shop}
spec:
  containers:
  - name: app
    image: app
    livenessProbe:
      httpGet: {port: 8080}
      periodSeconds: 10
      failureThreshold: 3
`)
	out, _, err = runCLI(t, "explain", pod, "--start-time", "45s")
	require.NoError(t, err, out)
	assert.Contains(t, out, "start budget:")
	assert.Contains(t, out, "warning: ", out)
	assert.Contains(t, out, "45s")
}

// usersManifestDir is a directory as users have them: a README beside a
// manifest whose web.yaml:11 repeats a key (periodSeconds, first at line
// 10).
func usersManifestDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "README.md", "# my pods\n")
	writeFile(t, dir, "web.yaml", `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  containers:
  - name: app
    image: app
    readinessProbe:
      httpGet: {port: 8080}
      periodSeconds: 5
      periodSeconds: 10
`)
	return dir
}

// writeFile writes body to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

// probe --address needs no runtime: a URL is an HTTP GET of it, HOST:PORT
// alone a TCP connect, the inline flags and --spec aim at it; --debug
// shows what was sent and received; -o json carries the same.
func TestProbeAnAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			io.WriteString(w, "ok")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "not yet")
	}))
	t.Cleanup(srv.Close)
	hostPort := strings.TrimPrefix(srv.URL, "http://")

	tests := []struct {
		name       string
		args       []string
		wantErr    error
		wantStdout []string
	}{
		{name: "URL", args: []string{"--address", srv.URL + "/healthz"}, wantStdout: []string{"result:   success\noutput:   ok\n"}},
		{name: "URL failing", args: []string{"--address", srv.URL + "/ready"}, wantErr: errProblemsFound,
			wantStdout: []string{"result:   failure\noutput:   HTTP probe failed with statuscode: 503"}},
		{name: "HOST:PORT alone is a TCP connect", args: []string{"--address", hostPort}, wantStdout: []string{"result:   success"}},
		{name: "inline path at the address's port", args: []string{"--address", hostPort, "--http-get", "/healthz"}, wantStdout: []string{"output:   ok"}},
		{name: "inline spec", args: []string{"--address", hostPort, "--spec", `{"httpGet":{"path":"/healthz","port":1},"timeoutSeconds":2}`}, wantStdout: []string{"output:   ok"}},
		{name: "inline spec in YAML", args: []string{"--address", hostPort, "--spec", "httpGet: {path: /ready, port: 1}"}, wantErr: errProblemsFound, wantStdout: []string{"statuscode: 503"}},
		{name: "debug transcript", args: []string{"--address", srv.URL + "/healthz", "--debug"},
			wantStdout: []string{"Logs for the probe:", "Connecting  address=" + hostPort, "> GET /healthz HTTP/1.1", "> User-Agent: kube-probe/1.36", "< HTTP/1.1 200 OK", "| ok", "Result as kubelet reports it:", "result:   success"}},
		{name: "json with the transcript", args: []string{"--address", srv.URL + "/healthz", "--debug", "-o", "json"},
			wantStdout: []string{`"result": "success"`, `"output": "ok"`, `"transcript": {`}},
		{name: "refused", args: []string{"--address", "127.0.0.1:1"}, wantErr: errProblemsFound, wantStdout: []string{"connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := runCLI(t, append([]string{"probe"}, tt.args...)...)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr, errOut)
			} else {
				require.NoError(t, err, errOut)
			}
			for _, want := range tt.wantStdout {
				assert.Contains(t, out, want)
			}
		})
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--address", hostPort, "--liveness"}, "a container's own probes"},
		{[]string{"--address", hostPort, "--", "true"}, "an exec probe runs in a container"},
		{[]string{"--address", hostPort, "--spec", `{"httpGet":{"port":1},"successThreshold":2,"bogus":1}`}, "--spec: "},
		{[]string{"--address", "ftp://x/", "--tcp", "1"}, "--address ftp://x/"},
	} {
		_, errOut, err := runCLI(t, append([]string{"probe"}, tt.args...)...)
		assert.ErrorIs(t, err, errUsage, "%v", tt.args)
		assert.Contains(t, errOut, tt.want, "%v", tt.args)
	}
}

// -f - reads standard input, as kubectl's.
func TestManifestFromStdin(t *testing.T) {
	manifest := `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  containers:
  - name: app
    image: app
    livenessProbe:
      httpGet: {port: 8080}
      periodSeconds: 0x
`
	var out, errb bytes.Buffer
	root := newRootCommand()
	root.SetArgs([]string{"validate", "-f", "-"})
	root.SetIn(strings.NewReader(manifest))
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(context.Background())
	assert.ErrorIs(t, err, errProblemsFound)
	assert.Contains(t, out.String(), "<stdin>:10: ")

	out.Reset()
	root = newRootCommand()
	root.SetArgs([]string{"explain", "-f", "-"})
	root.SetIn(strings.NewReader(strings.Replace(manifest, "0x", "10", 1)))
	root.SetOut(&out)
	root.SetErr(&errb)
	require.NoError(t, root.ExecuteContext(context.Background()))
	assert.Contains(t, out.String(), "pod shop/web (<stdin>:1)")
}
