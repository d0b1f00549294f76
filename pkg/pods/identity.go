package pods

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

// A pod is its UID and its namespace and name together. Sandboxes of one
// UID and one namespace/name are one pod (attempts 0, 1, … as its sandbox
// is re-created, as under kubelet). Over CRI any client chooses the UID,
// so a sandbox may reuse another pod's: it is not that pod, and is kept
// apart as a pod of its own, with a problem on both. Merged, it would
// become the pod's current sandbox and receive what is the pod's (its
// manifest's probes, credential headers, env expanded into exec commands,
// and for a pod the agent makes its stops, removal and hooks).

// claim is a UID the agent holds: a pod it makes (its static pod
// manifest) or made (its record), by namespace and name.
type claim struct{ namespace, name string }

// claims are the UIDs the agent holds: its manifests', then its records'.
func claims(in Inputs) map[string]claim {
	out := make(map[string]claim, len(in.StaticPods)+len(in.Records))
	for _, m := range in.StaticPods {
		out[m.UID] = claim{m.Namespace, m.Name}
	}
	for uid, rec := range in.Records {
		if _, ok := out[uid]; !ok {
			out[uid] = claim{rec.Namespace, rec.Name}
		}
	}
	return out
}

// agentsSandbox reports whether sb is a sandbox the agent made for the pod
// it claims: one with the pod's namespace and name and kubelet's
// file-source annotations, which the agent writes into every sandbox
// config it makes (spec.StaticPod, podconfig.Sandbox). Its records are of
// pods, by UID, not of sandboxes: so after an agent restart its sandboxes
// are its pods' again. A client that copies all of it has the runtime's
// socket and could stop the pod itself; this tells apart the sandboxes of
// a harness or a template that reuse a UID.
func agentsSandbox(sb *cri.Sandbox, c claim) bool {
	return sb.Namespace == c.namespace && sb.Name == c.name &&
		sb.Annotations[spec.ConfigSourceAnnotation] == spec.ConfigSourceFile && sb.Annotations[spec.ConfigHashAnnotation] == sb.UID
}

// identity tells apart the pods of one UID: a namespace and name, and
// whether they are the agent's sandboxes of a pod it claims.
type identity struct {
	namespace, name string
	agents          bool
}

// identify says which sandboxes are kept apart from the pod of their UID,
// and the conflicts, a problem of each pod of them (by key). The pods of a
// UID are told apart by identity; the one that holds the UID (its pod's
// key, cri.Sandbox.Key) is the pod the agent claims, else the one whose
// sandbox came first. Any other is kept apart under the OwnKey of its
// oldest sandbox: apart gives that key by sandbox ID.
func identify(sandboxes []*cri.Sandbox, claimed map[string]claim) (apart map[string]string, conflicts map[string][]*spec.Error) {
	identityOf := func(sb *cri.Sandbox) identity {
		c, ok := claimed[sb.UID]
		return identity{sb.Namespace, sb.Name, ok && agentsSandbox(sb, c)}
	}
	// One pass, no allocation per pod: a UID whose sandboxes all have the
	// identity of its first one (or the one the agent claims) is one pod.
	type seen struct {
		first identity
		mixed bool
	}
	byUID := make(map[string]seen, len(sandboxes))
	for _, sb := range sandboxes {
		if sb.Key() != sb.UID {
			continue // no UID to share
		}
		id := identityOf(sb)
		s, ok := byUID[sb.UID]
		if !ok {
			s.first = id
			if c, isClaimed := claimed[sb.UID]; isClaimed {
				s.first = identity{c.namespace, c.name, true}
			}
		}
		s.mixed = s.mixed || id != s.first
		byUID[sb.UID] = s
	}
	mixed := map[string][]*cri.Sandbox{}
	for _, sb := range sandboxes {
		if byUID[sb.UID].mixed {
			mixed[sb.UID] = append(mixed[sb.UID], sb)
		}
	}
	for uid, list := range mixed {
		c, isClaimed := claimed[uid]
		holder := identity{c.namespace, c.name, true}
		if !isClaimed {
			holder = identityOf(slices.MinFunc(list, oldestFirst))
		}
		groups := map[identity][]*cri.Sandbox{}
		for _, sb := range list {
			id := identityOf(sb)
			groups[id] = append(groups[id], sb)
		}
		for id, sbs := range groups {
			if id == holder {
				continue
			}
			key := slices.MinFunc(sbs, oldestFirst).OwnKey()
			if apart == nil {
				apart, conflicts = map[string]string{}, map[string][]*spec.Error{}
			}
			for _, sb := range sbs {
				apart[sb.ID] = key
			}
			onApart, onHolder := conflict(uid, isClaimed, holder, groups[holder], id, sbs)
			conflicts[key] = append(conflicts[key], onApart)
			conflicts[uid] = append(conflicts[uid], onHolder)
		}
	}
	for _, list := range conflicts {
		slices.SortFunc(list, func(a, b *spec.Error) int { return cmp.Compare(a.Error(), b.Error()) })
	}
	return apart, conflicts
}

// oldestFirst orders sandboxes by creation, then ID.
func oldestFirst(a, b *cri.Sandbox) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
}

// conflict is the problem of a pod kept apart (apart: its sandboxes, of
// identity id) and of the pod that holds its UID (holder; held: its
// sandboxes, maybe none yet): each names both pods, their sandboxes, and
// what to do. claimed: the holder is a pod the agent makes.
func conflict(uid string, claimed bool, holder identity, held []*cri.Sandbox, id identity, apart []*cri.Sandbox) (onApart, onHolder *spec.Error) {
	ids := func(sbs []*cri.Sandbox) string {
		out := make([]string, 0, len(sbs))
		for _, sb := range slices.SortedFunc(slices.Values(sbs), oldestFirst) {
			out = append(out, sb.ID)
		}
		return strings.Join(out, " ")
	}
	named := func(ns, name string, sbs []*cri.Sandbox) string {
		switch len(sbs) {
		case 0:
			return fmt.Sprintf("pod %s/%s (no sandbox yet)", ns, name)
		case 1:
			return fmt.Sprintf("pod %s/%s (sandbox %s)", ns, name, ids(sbs))
		}
		return fmt.Sprintf("pod %s/%s (sandboxes %s)", ns, name, ids(sbs))
	}
	holderName := holder.namespace + "/" + holder.name
	source := "sandbox " + slices.MinFunc(apart, oldestFirst).ID
	onApart = &spec.Error{Source: source, Namespace: id.namespace, Pod: id.name, Field: "metadata.uid"}
	onHolder = &spec.Error{Source: source, Namespace: holder.namespace, Pod: holder.name, Field: "metadata.uid"}
	fix := func(which string) string {
		return fmt.Sprintf("remove %s pod (crictl rmp -f %s) or create it with a UID of its own", which, ids(apart))
	}
	if !claimed {
		onApart.Detail = fmt.Sprintf("UID %q is that of %s: two pods cannot share a UID, so this pod is kept apart and gets nothing of %s's manifest, probes, hooks or restarts; %s",
			uid, named(holder.namespace, holder.name, held), holderName, fix("this"))
		onHolder.Detail = fmt.Sprintf("%s has this pod's UID %q too: two pods cannot share a UID, so that pod is kept apart and gets nothing of this pod's manifest, probes, hooks or restarts; %s",
			named(id.namespace, id.name, apart), uid, fix("that"))
		return onApart, onHolder
	}
	// The same name, UID and attempt: the runtime refuses the second.
	refused := func(whose string) string {
		if id.namespace != holder.namespace || id.name != holder.name {
			return ""
		}
		return "; until then the runtime may refuse " + whose + " sandbox of the same name and attempt"
	}
	onApart.Detail = fmt.Sprintf("UID %q is that of %s, which cri-prober makes, and cri-prober did not make this pod's sandbox (the sandboxes it makes carry the pod's namespace and name and kubelet's %s and %s annotations): this pod is kept apart, gets none of %s's probes or hooks, and cri-prober never stops or removes it; %s%s",
		uid, named(holder.namespace, holder.name, held), spec.ConfigSourceAnnotation, spec.ConfigHashAnnotation, holderName, fix("this"), refused(holderName+"'s"))
	onHolder.Detail = fmt.Sprintf("%s has this pod's UID %q, but cri-prober did not make it: that pod is kept apart, gets none of this pod's probes or hooks, and cri-prober never stops or removes it; %s%s",
		named(id.namespace, id.name, apart), uid, fix("that"), refused("this pod's"))
	return onApart, onHolder
}
