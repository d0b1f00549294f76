package prober

import "github.com/cri-prober/cri-prober/pkg/probe"

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
	// ReasonAgentResources: the agent itself ran out of file descriptors,
	// ephemeral ports or socket memory; the target is not to blame.
	ReasonAgentResources = "agent_resources"
	// ReasonExecReplyTooLarge: the command printed more than
	// --max-exec-reply-bytes, so its exit code could not be read.
	ReasonExecReplyTooLarge = "exec_reply_too_large"
	// ReasonAgentOverload: a network probe timed out while the agent's own
	// goroutines ran late (a flood of API requests, a CPU limit): the
	// target is not to blame.
	ReasonAgentOverload = "agent_overload"
	// ReasonDestinationRefused: the probe was aimed at a link-local or
	// cloud metadata address that --allow-probe-destination does not
	// allow; nothing was sent.
	ReasonDestinationRefused = "destination_refused"
)

// FailureReasons lists every reason, for metrics and docs.
var FailureReasons = []string{ReasonTimeout, ReasonConnectionRefused, ReasonNetwork, ReasonHTTPStatus, ReasonHTTPBody,
	ReasonGRPCNotServing, ReasonExecExitCode, ReasonRuntimeError, ReasonNetNS, ReasonAgentResources, ReasonAgentOverload,
	ReasonExecReplyTooLarge, ReasonDestinationRefused}

// failureReason names a network probe's failure cause, which the probe
// reports where it knows it (never parsed back out of the output).
var failureReason = map[probe.Cause]string{
	probe.CauseNone:       ReasonNetwork,
	probe.CauseRefused:    ReasonConnectionRefused,
	probe.CauseTimeout:    ReasonTimeout,
	probe.CauseNetwork:    ReasonNetwork,
	probe.CauseStatus:     ReasonHTTPStatus,
	probe.CauseBody:       ReasonHTTPBody,
	probe.CauseNotServing: ReasonGRPCNotServing,
}
