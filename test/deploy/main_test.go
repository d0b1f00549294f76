//go:build deploy

// Package deploy checks the files in deploy/ and the install story as they
// ship (issue 16, items 7 and 8): the systemd unit with systemd-analyze and
// the agent run under the unit's own sandbox, the Prometheus files with
// promtool, the DaemonSet decoded into the Kubernetes API types, and
// make install, make image and make release run into temporary
// directories. make test-deploy runs it (build tag deploy); it installs
// promtool and systemd-analyze from Debian packages if they are missing.
package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the repository, two levels up from this package.
var repoRoot = func() string {
	dir, err := filepath.Abs("../..")
	if err != nil {
		panic(err)
	}
	return dir
}()

// buildDir holds what the tests build once (TestMain removes it).
var buildDir string

func TestMain(m *testing.M) {
	if spec := os.Getenv(sandboxEnv); spec != "" {
		// This process is the sandbox launcher of startSandboxed: it
		// restricts itself and becomes the command; it never returns.
		execSandboxed(spec, os.Args[1:])
	}
	dir, err := os.MkdirTemp("", "cri-prober-deploy")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
)

// testVersion is what the test build of the agent reports as its version.
const testVersion = "v0.0.0-deploy-test"

// agentBinary builds the agent once for the package, apart from bin/
// (which make install and make image build, as a user would).
func agentBinary(t *testing.T) string {
	t.Helper()
	agentOnce.Do(func() {
		agentPath = filepath.Join(buildDir, "cri-prober")
		cmd := exec.Command("go", "build", "-ldflags", "-X main.version="+testVersion, "-o", agentPath, "./cmd/cri-prober")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = fmt.Errorf("go build ./cmd/cri-prober: %v\n%s", err, out)
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentPath
}

// run runs a command in dir and returns its standard output; it fails the
// test, with everything the command printed, when the command fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := tryRun(t, dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// tryRun runs a command and returns its standard output and error (on
// failure, the output includes its standard error).
func tryRun(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = nil
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

var (
	toolsOnce sync.Once
	promtool  string
	toolsErr  error
)

// deployTools runs hack/install-promtool.sh once: it installs
// systemd-analyze if missing and returns promtool's path.
func deployTools(t *testing.T) (promtoolPath string) {
	t.Helper()
	toolsOnce.Do(func() {
		cmd := exec.Command(filepath.Join(repoRoot, "hack/install-promtool.sh"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			toolsErr = fmt.Errorf("hack/install-promtool.sh: %v\n%s", err, stderr.String())
			return
		}
		promtool = strings.TrimSpace(string(out))
	})
	if toolsErr != nil {
		t.Fatal(toolsErr)
	}
	return promtool
}

// readFile reads a file of the repository.
func readFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
