package main

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// A wait given up because of a signal never exits 0: a cancelled CI step
// must not carry on as if the pod were ready. It exits as a shell reports
// the signal (130 for SIGINT, 143 for SIGTERM); a timeout exits 1.
func TestWaitExitCodes(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	rt.SetExecHandler(func(context.Context, string, []string, time.Duration) (*runtimeapi.ExecSyncResponse, error) {
		return &runtimeapi.ExecSyncResponse{ExitCode: 1, Stdout: []byte("not yet")}, nil
	})
	sb := rt.AddSandbox("ci", "web", "uid-web", fakeruntime.WithIP("10.1.2.3"))
	rt.AddContainer(sb, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, fakeruntime.WithAnnotations(map[string]string{
		spec.ReadinessAnnotation: `{"exec":{"command":["check"]},"periodSeconds":1}`,
	}))
	args := []string{"--for", "ready", "--pod", "ci/web", "--runtime-endpoint", rt.Endpoint()}

	for _, tt := range []struct {
		name  string
		cause error
		want  int
	}{
		{"SIGINT", interrupted{syscall.SIGINT}, 130},
		{"SIGTERM", interrupted{syscall.SIGTERM}, 143},
		{"cancelled otherwise", context.Canceled, 130},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			time.AfterFunc(300*time.Millisecond, func() { cancel(tt.cause) })
			var out, errb bytes.Buffer
			err := runWait(ctx, args, &out, &errb)
			var coded exitCode
			require.True(t, errors.As(err, &coded), "an exit code, not success: %v", err)
			assert.Equal(t, tt.want, coded.Code())
			assert.Contains(t, err.Error(), "while waiting: pod ci/web was not seen ready")
		})
	}

	t.Run("timeout", func(t *testing.T) {
		var out, errb bytes.Buffer
		err := runWait(context.Background(), append(args, "--timeout", "300ms"), &out, &errb)
		assert.ErrorIs(t, err, errProblemsFound, "exit code 1")
		assert.Contains(t, out.String(), "timed out after 300ms: pod ci/web is not ready")
	})
}
