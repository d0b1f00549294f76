package cri

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Issue 22: the runtime's DeadlineExceeded is the command's timeout
// whenever it comes (kubelet counts it so); only our own deadline passing
// without an answer is "the runtime did not answer".
func TestNoAnswer(t *testing.T) {
	const request = 2 * time.Minute // kubelet's runtime request timeout
	deadlineExceeded := status.Error(codes.DeadlineExceeded, "timeout 1s exceeded: context deadline exceeded")
	tests := []struct {
		name      string
		err       error
		ownPassed bool
		elapsed   time.Duration
		want      bool
	}{
		{"answered at the command's timeout", deadlineExceeded, false, time.Second, false},
		{"answered 90 s late: a background child held the output (sleep 90 & sleep 5)", deadlineExceeded, false, 90 * time.Second, false},
		{"answered 1.1 s before our deadline", deadlineExceeded, false, request - 100*time.Millisecond, false},
		{"the server's copy of our deadline (within 1 s of it)", deadlineExceeded, false, request + 500*time.Millisecond, true},
		{"our deadline passed", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true, request + time.Second, true},
		{"another error near the deadline is not a lack of answer", status.Error(codes.NotFound, "no such container"), false, request + 900*time.Millisecond, false},
		{"the caller's context ended: not ours to judge here", context.Canceled, false, time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, noAnswer(tt.err, tt.ownPassed, tt.elapsed, request+time.Second, request))
		})
	}
	assert.False(t, noAnswer(errors.New("x"), false, 0, 0, request))
}
