package cri

import (
	"time"

	"testing"

	eventtypes "github.com/containerd/containerd/api/events"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		topic  string
		event  proto.Message
		wantID string
		want   change
		wantOK bool
	}{
		{name: "init process exit", topic: "/tasks/exit", event: &eventtypes.TaskExit{ContainerID: "c1", ID: "c1"}, wantID: "c1", want: changeExited, wantOK: true},
		{name: "exec process exit needs no relist", topic: "/tasks/exit", event: &eventtypes.TaskExit{ContainerID: "c1", ID: "exec-42"}},
		{name: "init task deleted (runc shim: empty ID)", topic: "/tasks/delete", event: &eventtypes.TaskDelete{ContainerID: "c1"}, wantID: "c1", want: changeExited, wantOK: true},
		{name: "init task deleted (ID set)", topic: "/tasks/delete", event: &eventtypes.TaskDelete{ContainerID: "c1", ID: "c1"}, wantID: "c1", want: changeExited, wantOK: true},
		{name: "exec deleted", topic: "/tasks/delete", event: &eventtypes.TaskDelete{ContainerID: "c1", ID: "exec-1"}},
		{name: "task start", topic: "/tasks/start", event: &eventtypes.TaskStart{ContainerID: "c2"}, wantID: "c2", want: changeStarted, wantOK: true},
		{name: "container delete", topic: "/containers/delete", event: &eventtypes.ContainerDelete{ID: "c3"}, wantID: "c3", want: changeRemoved, wantOK: true},
		{name: "other topic", topic: "/tasks/oom", event: &eventtypes.TaskOOM{ContainerID: "c4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload, err := anypb.New(tt.event)
			require.NoError(t, err)
			id, c, ok, err := classify(&eventsapi.Envelope{Topic: tt.topic, Event: payload})
			require.NoError(t, err)
			assert.Equal(t, tt.wantOK, ok)
			if tt.wantOK {
				assert.Equal(t, tt.wantID, id)
				assert.Equal(t, tt.want, c)
			}
		})
	}
}

func TestClassifyRejectsGarbage(t *testing.T) {
	_, _, _, err := classify(&eventsapi.Envelope{Topic: "/tasks/exit", Event: &anypb.Any{Value: []byte{0xff, 0xff}}})
	assert.Error(t, err)
}

var testTime = time.Unix(1000, 0)

func TestChangeSeenIn(t *testing.T) {
	snap := NewSnapshot(
		testTime,
		[]*Sandbox{{ID: "sb-ready", State: SandboxReady}, {ID: "sb-stopped", State: SandboxNotReady}},
		[]*Container{
			{ID: "created", SandboxID: "sb-ready", State: StateCreated},
			{ID: "running", SandboxID: "sb-ready", State: StateRunning},
			{ID: "exited", SandboxID: "sb-ready", State: StateExited},
		},
	)
	tests := []struct {
		id     string
		change change
		want   bool
	}{
		{"created", changeStarted, false},
		{"running", changeStarted, true},
		{"absent", changeStarted, false},
		{"sb-ready", changeStarted, true},
		{"running", changeExited, false},
		{"exited", changeExited, true},
		{"sb-ready", changeExited, false},
		{"sb-stopped", changeExited, true},
		{"absent", changeExited, true},
		{"exited", changeRemoved, false},
		{"sb-stopped", changeRemoved, false},
		{"absent", changeRemoved, true},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.change.seenIn(snap, tt.id), "%s change %d", tt.id, tt.change)
	}
}
