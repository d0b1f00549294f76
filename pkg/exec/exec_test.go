package exec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

// fakeExec answers ExecSync with a canned response or error.
type fakeExec struct {
	resp *runtimeapi.ExecSyncResponse
	err  error
	got  []string
	tmo  time.Duration
}

func (f *fakeExec) ExecSync(_ context.Context, _ string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	f.got, f.tmo = cmd, timeout
	return f.resp, f.err
}

func TestRun(t *testing.T) {
	big := strings.Repeat("o", MaxOutput+100)
	tests := []struct {
		name    string
		fake    fakeExec
		want    Result
		wantErr bool
	}{
		{name: "exit 0", fake: fakeExec{resp: &runtimeapi.ExecSyncResponse{Stdout: []byte("ok\n")}}, want: Result{Output: "ok\n"}},
		{name: "non-zero exit keeps output", fake: fakeExec{resp: &runtimeapi.ExecSyncResponse{Stdout: []byte("out "), Stderr: []byte("err"), ExitCode: 2}}, want: Result{ExitCode: 2, Output: "out err"}},
		{name: "stdout then stderr, capped", fake: fakeExec{resp: &runtimeapi.ExecSyncResponse{Stdout: []byte(big), Stderr: []byte("lost")}}, want: Result{Output: big[:MaxOutput]}},
		{name: "stderr fills what stdout left", fake: fakeExec{resp: &runtimeapi.ExecSyncResponse{Stdout: []byte(big[:MaxOutput-2]), Stderr: []byte("abcd")}}, want: Result{Output: big[:MaxOutput-2] + "ab"}},
		{name: "timeout is a result", fake: fakeExec{err: fmt.Errorf("wrapped: %w", cri.ErrCommandTimedOut)}, want: Result{TimedOut: true, Output: `command "sh -c sleep 10" timed out`}},
		{name: "other errors are errors", fake: fakeExec{err: errors.New("container not running")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewRunner(&tt.fake).Run(context.Background(), "c1", []string{"sh", "-c", "sleep 10"}, 3*time.Second)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, 3*time.Second, tt.fake.tmo)
		})
	}
}
