package agent

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/events"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// Events of the readiness gates set through the API: who changed which
// condition of which pod (the API's audit).
const (
	ReasonGateSet   = "ReadinessGateSet"
	ReasonGateUnset = "ReadinessGateUnset"
)

// SetGate sets the condition t of the pod a namespace and name stand for
// (pods.View.ByName) to status, and records an event saying who did (by).
func (a *Agent) SetGate(ctx context.Context, namespace, name string, t corev1.PodConditionType, status corev1.ConditionStatus, by string) (pods.GateResult, error) {
	p, added, err := a.gatedPod(ctx, namespace, name)
	if err != nil {
		return pods.GateResult{}, err
	}
	change, err := a.Gates.Set(pods.Gate{PodKey: p.Key, Namespace: p.Namespace, Pod: p.Name, Type: t, Status: status, By: by})
	if err != nil {
		return pods.GateResult{}, err
	}
	res := a.gateResult(p, added, t, change)
	if change.Changed {
		was := ""
		if change.Previous != "" {
			was = fmt.Sprintf(" (was %s)", change.Previous)
		}
		a.recordGate(events.Event{Time: change.At, Reason: ReasonGateSet, Namespace: p.Namespace, Pod: p.Name,
			Message: fmt.Sprintf("Condition %q set to %s%s by %s%s", string(t), status, was, by, undeclared(res.Declared, t))})
	}
	return res, nil
}

// UnsetGate removes the condition t of the pod, as SetGate sets it.
func (a *Agent) UnsetGate(ctx context.Context, namespace, name string, t corev1.PodConditionType, by string) (pods.GateResult, error) {
	p, added, err := a.gatedPod(ctx, namespace, name)
	if err != nil {
		return pods.GateResult{}, err
	}
	change, err := a.Gates.Unset(p.Key, t)
	if err != nil {
		return pods.GateResult{}, err
	}
	res := a.gateResult(p, added, t, change)
	if change.Changed {
		a.recordGate(events.Event{Time: change.At, Reason: ReasonGateUnset, Namespace: p.Namespace, Pod: p.Name,
			Message: fmt.Sprintf("Condition %q (%s) unset by %s%s", string(t), change.Previous, by, undeclared(res.Declared, t))})
	}
	return res, nil
}

func undeclared(declared bool, t corev1.PodConditionType) string {
	if declared {
		return ""
	}
	return fmt.Sprintf("; the pod has no readiness gate %q, so its readiness does not change", string(t))
}

// gatedPod finds the pod, and what its syncs add to its status, first
// dropping the gates of pods the runtime no longer has (once it has been
// listed: never on an empty first view).
func (a *Agent) gatedPod(ctx context.Context, namespace, name string) (*pods.Pod, pods.PodStatus, error) {
	status := a.Status()
	view := status.View
	if view != nil && a.Poller.Snapshot() != nil {
		dropped, err := a.Gates.Prune(func(key string) bool { _, ok := view.Pod(key); return ok })
		if err != nil {
			klog.FromContext(ctx).Error(err, "Cannot drop the readiness gates of pods that are gone")
		}
		for _, g := range dropped {
			klog.FromContext(ctx).V(2).Info("Dropped the readiness gate of a pod that is gone", "pod", klog.KRef(g.Namespace, g.Pod), "podKey", g.PodKey, "condition", g.Type)
		}
	}
	p, ok := view.ByName(namespace, name)
	if !ok {
		return nil, pods.PodStatus{}, fmt.Errorf("%w: no pod %s/%s on this node (cri-prober status lists them)", pods.ErrPodNotFound, namespace, name)
	}
	return p, status.For(p.Key), nil
}

func (a *Agent) gateResult(p *pods.Pod, added pods.PodStatus, t corev1.PodConditionType, change pods.GateChange) pods.GateResult {
	res := pods.GateResult{GateChange: change, Pod: pods.ReportPod(p, added, a.Store, a.Gates.Gates()), Persistent: a.Gates.Persistent()}
	res.Declared = slices.Contains(res.Pod.ReadinessGates, t)
	return res
}

func (a *Agent) recordGate(e events.Event) {
	e.Type = events.Normal
	if a.recorder != nil {
		a.recorder.Record(e)
		return
	}
	events.Log(klog.Background()).Record(e)
}

// ListGates returns every gate set, and whether they survive the agent's
// restart (a state directory).
func (a *Agent) ListGates() ([]pods.Gate, bool) { return a.Gates.List(), a.Gates.Persistent() }
