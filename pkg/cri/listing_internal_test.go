package cri

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// stubRuntime lists what it is given; statuses repeat the listing.
type stubRuntime struct {
	pods       []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
}

func (s *stubRuntime) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return s.pods, nil
}

func (s *stubRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return s.containers, nil
}

func (s *stubRuntime) PodSandboxStatus(_ context.Context, id string, _ bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	for _, sb := range s.pods {
		if sb.GetId() == id {
			return &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{Id: id, State: sb.GetState()}}, nil
		}
	}
	return nil, status.Error(codes.NotFound, id)
}

func (s *stubRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	for _, c := range s.containers {
		if c.GetId() == id {
			return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, State: c.GetState(), StartedAt: 1}}, nil
		}
	}
	return nil, status.Error(codes.NotFound, id)
}

// encodedStub is a stubRuntime that also answers as Client does, encoded.
type encodedStub struct{ stubRuntime }

func (s *encodedStub) listPodSandboxEncoded(context.Context) (encodedPodSandboxes, error) {
	return proto.Marshal(&runtimeapi.ListPodSandboxResponse{Items: s.pods})
}

func (s *encodedStub) listContainersEncoded(context.Context) (encodedContainers, error) {
	return proto.Marshal(&runtimeapi.ListContainersResponse{Containers: s.containers})
}

func TestRelistNeverTakesADuplicateForAMissingOne(t *testing.T) {
	sb := &runtimeapi.PodSandbox{Id: "sb", Metadata: &runtimeapi.PodSandboxMetadata{Name: "p"}, State: runtimeapi.PodSandboxState_SANDBOX_READY}
	sb2 := &runtimeapi.PodSandbox{Id: "sb2", Metadata: &runtimeapi.PodSandboxMetadata{Name: "q"}, State: runtimeapi.PodSandboxState_SANDBOX_READY}
	ctr := func(id string) *runtimeapi.Container {
		return &runtimeapi.Container{Id: id, PodSandboxId: "sb", Metadata: &runtimeapi.ContainerMetadata{Name: id}, State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	}
	// Same counts, every ID known, but one listed twice: a runtime's bug,
	// yet the listing is what the poller publishes.
	cases := map[string]struct {
		pods       []*runtimeapi.PodSandbox
		containers []*runtimeapi.Container
		wantPods   int
		wantCtrs   int
	}{
		"container listed twice": {[]*runtimeapi.PodSandbox{sb, sb2}, []*runtimeapi.Container{ctr("a"), ctr("a")}, 2, 1},
		"sandbox listed twice":   {[]*runtimeapi.PodSandbox{sb, sb}, []*runtimeapi.Container{ctr("a"), ctr("b")}, 1, 2},
	}
	for name, tc := range cases {
		for kind, rt := range map[string]interface {
			RuntimeReader
			set(pods []*runtimeapi.PodSandbox, containers []*runtimeapi.Container)
		}{"decoded": &stubRuntime{}, "encoded": &encodedStub{}} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				p, err := NewPoller(rt, PollerConfig{})
				require.NoError(t, err)
				rt.set([]*runtimeapi.PodSandbox{sb, sb2}, []*runtimeapi.Container{ctr("a"), ctr("b")})
				_, err = p.Relist(context.Background())
				require.NoError(t, err)

				rt.set(tc.pods, tc.containers)
				snap, err := p.Relist(context.Background())
				require.NoError(t, err)
				assert.Len(t, snap.Sandboxes(), tc.wantPods)
				assert.Len(t, snap.Containers(), tc.wantCtrs)
			})
		}
	}
}

func (s *stubRuntime) set(pods []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) {
	s.pods, s.containers = pods, containers
}

// each reads what proto.Unmarshal would, whatever the order of the fields,
// repeated ones (the last wins), unknown ones, or known numbers with another
// wire type (unknown fields too).
func TestEncodedListingReadsAsProtoDoes(t *testing.T) {
	var item []byte
	item = protowire.AppendTag(item, containerStateField, protowire.VarintType)
	item = protowire.AppendVarint(item, uint64(runtimeapi.ContainerState_CONTAINER_EXITED))
	item = protowire.AppendTag(item, 99, protowire.BytesType) // unknown
	item = protowire.AppendString(item, "whatever")
	item = protowire.AppendTag(item, containerIDField, protowire.BytesType)
	item = protowire.AppendString(item, "first")
	item = protowire.AppendTag(item, containerSandboxIDField, protowire.BytesType)
	item = protowire.AppendString(item, "sb")
	item = protowire.AppendTag(item, containerIDField, protowire.BytesType)
	item = protowire.AppendString(item, "second")
	item = protowire.AppendTag(item, containerStateField, protowire.Fixed32Type) // wrong type: unknown
	item = protowire.AppendFixed32(item, 7)
	item = protowire.AppendTag(item, containerIDField, protowire.VarintType) // wrong type: unknown
	item = protowire.AppendVarint(item, 5)

	var list []byte
	list = protowire.AppendTag(list, 2, protowire.VarintType) // unknown top-level field
	list = protowire.AppendVarint(list, 1)
	list = protowire.AppendTag(list, listItemsField, protowire.BytesType)
	list = protowire.AppendBytes(list, item)
	list = protowire.AppendTag(list, listItemsField, protowire.BytesType)
	list = protowire.AppendBytes(list, nil) // an empty container

	var want runtimeapi.ListContainersResponse
	require.NoError(t, proto.Unmarshal(list, &want))
	type row struct {
		id, sandboxID string
		state         runtimeapi.ContainerState
	}
	var wantRows, gotRows []row
	for _, c := range want.GetContainers() {
		wantRows = append(wantRows, row{c.GetId(), c.GetPodSandboxId(), c.GetState()})
	}
	ok := encodedContainers(list).each(func(id, sandboxID []byte, state runtimeapi.ContainerState) bool {
		gotRows = append(gotRows, row{string(id), string(sandboxID), state})
		return true
	})
	assert.True(t, ok)
	assert.Equal(t, wantRows, gotRows)
	assert.Equal(t, row{"second", "sb", runtimeapi.ContainerState_CONTAINER_EXITED}, gotRows[0])

	sandboxes, err := proto.Marshal(&runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{
		{Id: "s1", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, Metadata: &runtimeapi.PodSandboxMetadata{Name: "n"}, Labels: map[string]string{"k": "v"}},
		{Id: "s2"},
	}})
	require.NoError(t, err)
	var got []string
	assert.True(t, encodedPodSandboxes(sandboxes).each(func(id []byte, state runtimeapi.PodSandboxState) bool {
		got = append(got, string(id)+"="+state.String())
		return true
	}))
	assert.Equal(t, []string{"s1=SANDBOX_NOTREADY", "s2=SANDBOX_READY"}, got)

	assert.False(t, encodedContainers(list[:len(list)-3]).each(func([]byte, []byte, runtimeapi.ContainerState) bool { return true }),
		"a truncated listing is malformed")
	_, err = encodedContainers(list[:len(list)-3]).decode()
	assert.Equal(t, codes.Internal, status.Code(err), "and fails to decode as gRPC fails: %v", err)
}
