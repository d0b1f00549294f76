package cri

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/reflect/protoreflect"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The poller reads list replies by field number (listing.go); the numbers
// are checked against the descriptors generated for the cri-api version
// in go.mod, so that an upgrade that moves or retypes a field fails here
// rather than reading the wrong field.
func TestListingFieldNumbersMatchCRIAPI(t *testing.T) {
	tests := []struct {
		msg   protoreflect.ProtoMessage
		field protoreflect.Name
		num   int
		kind  protoreflect.Kind
	}{
		{&runtimeapi.ListPodSandboxResponse{}, "items", listItemsField, protoreflect.MessageKind},
		{&runtimeapi.ListContainersResponse{}, "containers", listItemsField, protoreflect.MessageKind},
		{&runtimeapi.PodSandbox{}, "id", sandboxIDField, protoreflect.StringKind},
		{&runtimeapi.PodSandbox{}, "state", sandboxStateField, protoreflect.EnumKind},
		{&runtimeapi.Container{}, "id", containerIDField, protoreflect.StringKind},
		{&runtimeapi.Container{}, "pod_sandbox_id", containerSandboxIDField, protoreflect.StringKind},
		{&runtimeapi.Container{}, "state", containerStateField, protoreflect.EnumKind},
	}
	for _, tt := range tests {
		desc := tt.msg.ProtoReflect().Descriptor()
		f := desc.Fields().ByName(tt.field)
		if !assert.NotNil(t, f, "%s has no field %s", desc.FullName(), tt.field) {
			continue
		}
		assert.Equal(t, protoreflect.FieldNumber(tt.num), f.Number(), "%s.%s", desc.FullName(), tt.field)
		assert.Equal(t, tt.kind, f.Kind(), "%s.%s", desc.FullName(), tt.field)
	}
}
