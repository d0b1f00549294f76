package probe

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// childEnv tells a test that it runs in a process of its own, started by
// runChild: for what changes a whole process (its resource limits, its
// view of /etc/hosts) and must not touch the other tests.
const childEnv = "NETPROBE_TEST_CHILD"

// inChild says whether this process is the child runChild started for t.
func inChild(t *testing.T) bool { return os.Getenv(childEnv) == t.Name() }

// runChild runs t again in a new process of the test binary, with env and
// attr, and passes if it passes, skips if it skips.
func runChild(t *testing.T, env []string, attr *syscall.SysProcAttr) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v")
	cmd.Env = append(append(os.Environ(), childEnv+"="+t.Name()), env...)
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "--- SKIP: "+t.Name()) {
		t.Skipf("the child skipped:\n%s", out)
	}
	require.NoError(t, err, "child:\n%s", out)
	require.Contains(t, string(out), "--- PASS: "+t.Name(), "child:\n%s", out)
	t.Logf("child:\n%s", out)
}
