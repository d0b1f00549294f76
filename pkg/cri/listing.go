package cri

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the codec rawCodec wraps
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A relist at node scale is mostly decoding: ten thousand containers are
// two megabytes of protobuf and a hundred thousand allocations, every
// second, to find (nearly always) that nothing changed. The Client can hand
// the poller the two listings still encoded; the poller reads from them only
// what its reuse decision needs (IDs, sandbox IDs, states) and decodes them
// only when something changed.

// encodedLister is what Client offers beyond RuntimeReader: the unfiltered
// listings as the runtime encoded them.
type encodedLister interface {
	listPodSandboxEncoded(ctx context.Context) (encodedPodSandboxes, error)
	listContainersEncoded(ctx context.Context) (encodedContainers, error)
}

var _ encodedLister = (*Client)(nil)

// encodedPodSandboxes is a ListPodSandboxResponse as received.
type encodedPodSandboxes []byte

// encodedContainers is a ListContainersResponse as received.
type encodedContainers []byte

// rawReply receives a reply undecoded (see rawCodec).
type rawReply struct{ data []byte }

// rawCodec encodes requests as the proto codec does and leaves a reply
// addressed to a *rawReply encoded (copied: gRPC reuses its buffers).
type rawCodec struct{ encoding.CodecV2 }

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawReply); ok {
		r.data = data.Materialize()
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

var rawCallOption = grpc.ForceCodecV2(rawCodec{encoding.GetCodecV2("proto")})

func (c *Client) listEncoded(ctx context.Context, method string, req proto.Message) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	var reply rawReply
	if err := c.conn.Invoke(ctx, method, req, &reply, rawCallOption); err != nil {
		return nil, err
	}
	return reply.data, nil
}

func (c *Client) listPodSandboxEncoded(ctx context.Context) (encodedPodSandboxes, error) {
	b, err := c.listEncoded(ctx, runtimeapi.RuntimeService_ListPodSandbox_FullMethodName, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	return b, nil
}

func (c *Client) listContainersEncoded(ctx context.Context) (encodedContainers, error) {
	b, err := c.listEncoded(ctx, runtimeapi.RuntimeService_ListContainers_FullMethodName, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	return b, nil
}

// decode decodes the listing as ListPodSandbox would have, failing as gRPC
// fails on a reply it cannot decode.
func (e encodedPodSandboxes) decode() ([]*runtimeapi.PodSandbox, error) {
	var resp runtimeapi.ListPodSandboxResponse
	if err := proto.Unmarshal(e, &resp); err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", undecodable(err))
	}
	return resp.GetItems(), nil
}

func (e encodedContainers) decode() ([]*runtimeapi.Container, error) {
	var resp runtimeapi.ListContainersResponse
	if err := proto.Unmarshal(e, &resp); err != nil {
		return nil, fmt.Errorf("list containers: %w", undecodable(err))
	}
	return resp.GetContainers(), nil
}

func undecodable(err error) error {
	return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
}

// Field numbers in runtime.v1's api.proto.
const (
	listItemsField = 1 // ListPodSandboxResponse.items, ListContainersResponse.containers

	sandboxIDField    = 1
	sandboxStateField = 3

	containerIDField        = 1
	containerSandboxIDField = 2
	containerStateField     = 6
)

// each calls f with every listed sandbox's ID and state, read from the
// encoding as proto.Unmarshal would (the last of a repeated field wins;
// fields of another wire type than declared are unknown fields). It returns
// false, having stopped, when f does or the encoding is malformed (its
// decoding then fails too). Only the structure read here is checked: an
// invalid nested message or string shows when the listing is decoded.
func (e encodedPodSandboxes) each(f func(id []byte, state runtimeapi.PodSandboxState) bool) bool {
	return eachItem(e, func(item []byte) bool {
		var id []byte
		var state uint64
		ok := eachField(item, func(num protowire.Number, typ protowire.Type, b []byte) int {
			var n int
			switch {
			case num == sandboxIDField && typ == protowire.BytesType:
				id, n = protowire.ConsumeBytes(b)
			case num == sandboxStateField && typ == protowire.VarintType:
				state, n = protowire.ConsumeVarint(b)
			default:
				n = protowire.ConsumeFieldValue(num, typ, b)
			}
			return n
		})
		return ok && f(id, runtimeapi.PodSandboxState(int32(state)))
	})
}

// each is encodedPodSandboxes.each for containers: ID, sandbox ID, state.
func (e encodedContainers) each(f func(id, sandboxID []byte, state runtimeapi.ContainerState) bool) bool {
	return eachItem(e, func(item []byte) bool {
		var id, sandboxID []byte
		var state uint64
		ok := eachField(item, func(num protowire.Number, typ protowire.Type, b []byte) int {
			var n int
			switch {
			case num == containerIDField && typ == protowire.BytesType:
				id, n = protowire.ConsumeBytes(b)
			case num == containerSandboxIDField && typ == protowire.BytesType:
				sandboxID, n = protowire.ConsumeBytes(b)
			case num == containerStateField && typ == protowire.VarintType:
				state, n = protowire.ConsumeVarint(b)
			default:
				n = protowire.ConsumeFieldValue(num, typ, b)
			}
			return n
		})
		return ok && f(id, sandboxID, runtimeapi.ContainerState(int32(state)))
	})
}

// eachItem calls f with the encoding of every element of a list reply's
// repeated field 1.
func eachItem(b []byte, f func(item []byte) bool) bool {
	return eachField(b, func(num protowire.Number, typ protowire.Type, b []byte) int {
		if num != listItemsField || typ != protowire.BytesType {
			return protowire.ConsumeFieldValue(num, typ, b)
		}
		item, n := protowire.ConsumeBytes(b)
		if n >= 0 && !f(item) {
			return -1
		}
		return n
	})
}

// eachField calls consume with every field's number, wire type and the
// bytes from its value on; consume returns the value's length, negative to
// stop. eachField reports whether it went through the whole message.
func eachField(b []byte, consume func(num protowire.Number, typ protowire.Type, b []byte) int) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if n = consume(num, typ, b); n < 0 {
			return false
		}
		b = b[n:]
	}
	return true
}
