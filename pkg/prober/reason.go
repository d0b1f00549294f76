package prober

import (
	"strings"

	"github.com/cri-prober/cri-prober/pkg/prober/netprobe"
)

// Why a probe failed or could not run: a bounded set of values for
// cri_prober_probe_failures_total, so "why" needs no unbounded label
// (blackbox_exporter#1077).
const (
	ReasonTimeout           = "timeout"
	ReasonConnectionRefused = "connection_refused"
	// ReasonNetwork: another network error (reset, unreachable, too many
	// redirects, TLS).
	ReasonNetwork    = "network_error"
	ReasonHTTPStatus = "http_status"
	// ReasonHTTPBody: the body did not match failIfBodyNotMatchesRegexp.
	ReasonHTTPBody       = "http_body"
	ReasonGRPCNotServing = "grpc_not_serving"
	ReasonExecExitCode   = "exec_exit_code"
	// ReasonRuntimeError: the probe could not run (the runtime unreachable,
	// the container gone, no pod IP yet…); kubelet throws such results away.
	ReasonRuntimeError = "runtime_error"
	// ReasonNetNS: the pod's network namespace could not be entered.
	ReasonNetNS = "netns_error"
)

// FailureReasons lists every reason, for metrics and docs.
var FailureReasons = []string{ReasonTimeout, ReasonConnectionRefused, ReasonNetwork, ReasonHTTPStatus, ReasonHTTPBody,
	ReasonGRPCNotServing, ReasonExecExitCode, ReasonRuntimeError, ReasonNetNS}

// networkFailureReason classifies an HTTP, TCP or gRPC failure from its
// output: kubelet's own texts, which netprobe builds and its tests pin, and
// for transport errors the Go and syscall texts ("connection refused",
// "i/o timeout", "deadline exceeded"), which are stable.
func networkFailureReason(output string) string {
	switch {
	case strings.HasPrefix(output, "HTTP probe failed with statuscode:"):
		return ReasonHTTPStatus
	case strings.HasPrefix(output, netprobe.BodyMismatch):
		return ReasonHTTPBody
	case strings.HasPrefix(output, "service unhealthy"),
		strings.Contains(output, "does not implement the grpc health protocol"):
		return ReasonGRPCNotServing
	case strings.Contains(output, "connection refused"):
		return ReasonConnectionRefused
	case strings.HasPrefix(output, "timeout:"),
		strings.Contains(output, "Client.Timeout exceeded"),
		strings.Contains(output, "i/o timeout"),
		strings.Contains(output, "deadline exceeded"):
		return ReasonTimeout
	default:
		return ReasonNetwork
	}
}
