package pods

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/cri-prober/cri-prober/pkg/statefile"
)

// Readiness gates set locally. Under kubelet, whatever owns a readiness
// gate (a load balancer controller) writes its condition into the pod's
// status.conditions through the API server, and kubelet's
// GeneratePodReadyCondition finds it there. Without an API server nothing
// could: GateStore is where `cri-prober gate set` writes those conditions
// instead, and the pod's conditions read them (conditions: they come
// before kubelet's own, as the conditions kubelet does not own do in its
// status).
//
// A gate belongs to one pod (its Key: the UID), as a condition belongs to
// one Pod object: a pod made again with another UID (an edited static pod
// manifest, a sandbox made again by crictl) starts with none, and the
// gates of a pod the runtime no longer has are dropped (Prune).

// Gate is one condition set on a pod.
type Gate struct {
	// PodKey is the pod's Key (its UID); Namespace and Pod its name when
	// the gate was set.
	PodKey    string `json:"podKey"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	// Type is the condition's type, as a readiness gate names it.
	Type corev1.PodConditionType `json:"type"`
	// Status is True or False.
	Status corev1.ConditionStatus `json:"status"`
	// LastTransitionTime is when Status last changed.
	LastTransitionTime time.Time `json:"lastTransitionTime"`
	// By says who set it last (the API's audit: a uid, a user, an
	// address).
	By string `json:"by,omitempty"`
}

// Limits of the gate store: what a client of the API can make the agent
// hold, and save at every change.
const (
	// MaxGatesPerPod bounds the conditions set on one pod.
	MaxGatesPerPod = 32
	// MaxGatedPods bounds the pods with gates set.
	MaxGatedPods = 10000
)

// Errors of GateStore.Set, for the API's answers (errors.Is).
var (
	// ErrInvalidGate: a condition type or status that cannot be set.
	ErrInvalidGate = errors.New("invalid readiness gate")
	// ErrTooManyGates: a limit of the store would be passed.
	ErrTooManyGates = errors.New("too many readiness gates")
)

// kubeletConditions are the conditions kubelet owns and computes itself
// (pkg/kubelet/types PodConditionsByKubelet, with the feature gates of
// 1.36 on): kubelet drops any other writer's, so no gate can be one.
var kubeletConditions = []corev1.PodConditionType{
	corev1.PodScheduled, corev1.PodReady, corev1.PodInitialized, corev1.ContainersReady,
	corev1.PodResizeInProgress, corev1.PodResizePending, corev1.PodReadyToStartContainers, corev1.AllContainersRestarting,
}

// ParseGateStatus reads True or False (any letter case), as a condition's
// status is written.
func ParseGateStatus(s string) (corev1.ConditionStatus, error) {
	switch strings.ToLower(s) {
	case "true":
		return corev1.ConditionTrue, nil
	case "false":
		return corev1.ConditionFalse, nil
	}
	return "", fmt.Errorf("%w: status %q: want True or False", ErrInvalidGate, s)
}

// ValidateGateType checks a condition type as the API server checks a
// readiness gate's (a qualified name, such as example.com/lb-ready), and
// refuses kubelet's own conditions, which kubelet computes over anyone
// else's.
func ValidateGateType(t corev1.PodConditionType) error {
	if slices.Contains(kubeletConditions, t) {
		return fmt.Errorf("%w: condition %q is kubelet's own, computed by the agent: a readiness gate names a condition of its own, such as example.com/lb-ready", ErrInvalidGate, string(t))
	}
	if errs := validation.IsQualifiedName(string(t)); len(errs) > 0 {
		return fmt.Errorf("%w: condition type %q: %s", ErrInvalidGate, string(t), strings.Join(errs, "; "))
	}
	return nil
}

// GateSet is the gates of every pod at one moment, immutable: the input of
// the pods' conditions (Report). The zero GateSet has none.
type GateSet struct {
	byPod map[string][]Condition
}

// For returns the conditions set on the pod of the given key, ordered by
// type (nil: none). The slice must not be modified.
func (s GateSet) For(podKey string) []Condition { return s.byPod[podKey] }

// GateStore keeps the gates set through the API, in memory, and with a
// state directory in its file too (gates.json), so that they survive the
// agent's restart. Safe for concurrent use; readers take a GateSet
// without waiting for writers.
type GateStore struct {
	dir   string
	clock clock.PassiveClock

	mu    sync.Mutex // serialises changes and their saves
	gates map[string][]Gate

	set     atomic.Pointer[GateSet]
	version atomic.Uint64
}

// gateFile is the store's file in the state directory, written whole
// through pkg/statefile at every change (before the change is answered):
// {"version":1,"gates":[…]}.
const gateFile = "gates.json"

// gateFileFormat is the file's format; one that cannot be read is set
// aside (pkg/statefile's policy: gates.json.bad, or gates.json.vN for a
// newer format, not overwritten) and the store starts empty.
var gateFileFormat = statefile.Format{
	Name: gateFile, What: "readiness gates", Plural: true, Limit: 16 << 20, Version: 1,
	VersionOf: statefile.VersionField, Then: "starting with no gates set",
}

type gateFileContent struct {
	Version int    `json:"version"`
	Gates   []Gate `json:"gates"`
}

// NewGateStore returns a store kept in memory only: an agent restart
// forgets its gates.
func NewGateStore(c clock.PassiveClock) *GateStore {
	if c == nil {
		c = clock.RealClock{}
	}
	s := &GateStore{clock: c, gates: map[string][]Gate{}}
	s.publish()
	return s
}

// OpenGateStore returns a store kept in dir (made 0700 if missing), with
// the gates a previous agent saved there. A file that cannot be read as
// such is set aside and the store starts empty: warning (a
// *statefile.Warning) says so, beside a usable store. A directory that
// cannot be used is an error (no store).
func OpenGateStore(dir string, c clock.PassiveClock) (s *GateStore, warning, err error) {
	s = NewGateStore(c)
	s.dir = dir
	d, err := statefile.OpenDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("readiness gates: %w", err)
	}
	defer d.Close()
	var gates []Gate
	found, warning, err := statefile.Load(d, &gateFileFormat, func(raw []byte, _ int) error {
		var content gateFileContent
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&content); err != nil {
			return err
		}
		for _, g := range content.Gates {
			if err := validGate(g); err != nil {
				return err
			}
		}
		gates = content.Gates
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if !found {
		return s, warning, nil
	}
	for _, g := range gates {
		if (len(s.gates) >= MaxGatedPods && s.gates[g.PodKey] == nil) || len(s.gates[g.PodKey]) >= MaxGatesPerPod {
			continue
		}
		s.gates[g.PodKey] = upsertGate(s.gates[g.PodKey], g)
	}
	s.publish()
	return s, nil, nil
}

// validGate checks a gate read from the file.
func validGate(g Gate) error {
	if g.PodKey == "" {
		return errors.New("a gate without podKey")
	}
	if err := ValidateGateType(g.Type); err != nil {
		return err
	}
	if g.Status != corev1.ConditionTrue && g.Status != corev1.ConditionFalse {
		return fmt.Errorf("gate %q: status %q", string(g.Type), string(g.Status))
	}
	return nil
}

// Persistent says whether the gates survive the agent's restart.
func (s *GateStore) Persistent() bool { return s.dir != "" }

// Gates returns the gates of every pod now, for the pods' conditions.
func (s *GateStore) Gates() GateSet {
	if s == nil {
		return GateSet{}
	}
	return *s.set.Load()
}

// Version changes whenever the gates do.
func (s *GateStore) Version() uint64 {
	if s == nil {
		return 0
	}
	return s.version.Load()
}

// List returns every gate, by namespace, pod and type.
func (s *GateStore) List() []Gate {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Gate
	for _, list := range s.gates {
		out = append(out, list...)
	}
	slices.SortFunc(out, func(a, b Gate) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Pod, b.Pod), strings.Compare(a.PodKey, b.PodKey),
			strings.Compare(string(a.Type), string(b.Type)))
	})
	return out
}

// GateChange is what a Set or Unset did.
type GateChange struct {
	// Gate is the gate as it is now (Unset: as it was).
	Gate Gate
	// Changed: its status changed (or it was added or removed); false for
	// a Set to the status it had, or an Unset of a gate not set.
	Changed bool
	// Previous is its status before ("": not set).
	Previous corev1.ConditionStatus
	// At is when it changed (the store's clock).
	At time.Time
}

// ErrPodNotFound: no pod of that namespace and name.
var ErrPodNotFound = errors.New("pod not found")

// GateResult is what setting or unsetting a gate of a pod did, and the
// pod after.
type GateResult struct {
	GateChange
	// Declared: the pod's spec has a readiness gate of the condition, so
	// the condition counts for its readiness; otherwise it is shown and
	// changes nothing, as under kubelet.
	Declared bool
	// Pod is the pod as reported after the change.
	Pod PodReport
	// Persistent: the change survives the agent's restart (a state
	// directory).
	Persistent bool
}

// Set sets the condition g.Type of the pod g.PodKey to g.Status, by g.By
// (LastTransitionTime is the store's clock's, when the status changes).
// With a state directory the change is saved before Set returns; if it
// cannot be, nothing changes and the error says why.
func (s *GateStore) Set(g Gate) (GateChange, error) {
	if err := ValidateGateType(g.Type); err != nil {
		return GateChange{}, err
	}
	if g.Status != corev1.ConditionTrue && g.Status != corev1.ConditionFalse {
		return GateChange{}, fmt.Errorf("%w: status %q: want True or False", ErrInvalidGate, string(g.Status))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.gates[g.PodKey]
	i := slices.IndexFunc(list, func(x Gate) bool { return x.Type == g.Type })
	if i >= 0 && list[i].Status == g.Status {
		return GateChange{Gate: list[i], Previous: g.Status}, nil
	}
	switch {
	case i < 0 && list == nil && len(s.gates) >= MaxGatedPods:
		return GateChange{}, fmt.Errorf("%w: %d pods have gates set, the agent's limit: unset the gates of pods that no longer need them (cri-prober gate list)", ErrTooManyGates, MaxGatedPods)
	case i < 0 && len(list) >= MaxGatesPerPod:
		return GateChange{}, fmt.Errorf("%w: pod %s/%s has %d conditions set, the agent's limit: unset one first (cri-prober gate unset)", ErrTooManyGates, g.Namespace, g.Pod, MaxGatesPerPod)
	}
	change := GateChange{Changed: true, At: s.clock.Now()}
	if i >= 0 {
		change.Previous = list[i].Status
	}
	g.LastTransitionTime = change.At
	next := upsertGate(slices.Clone(list), g)
	if err := s.commitLocked(g.PodKey, next); err != nil {
		return GateChange{}, err
	}
	change.Gate = g
	return change, nil
}

// Unset removes the condition t of the pod podKey: the pod's readiness
// gate of it, if it declares one, is then not met ("does not exist").
func (s *GateStore) Unset(podKey string, t corev1.PodConditionType) (GateChange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.gates[podKey]
	i := slices.IndexFunc(list, func(x Gate) bool { return x.Type == t })
	if i < 0 {
		return GateChange{}, nil
	}
	old := list[i]
	if err := s.commitLocked(podKey, slices.Delete(slices.Clone(list), i, i+1)); err != nil {
		return GateChange{}, err
	}
	return GateChange{Gate: old, Changed: true, Previous: old.Status, At: s.clock.Now()}, nil
}

// Prune drops the gates of the pods keep does not keep (the runtime no
// longer has them), as kubelet forgets the status of a deleted pod. It
// returns the gates dropped.
func (s *GateStore) Prune(keep func(podKey string) bool) ([]Gate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// One pass: a pod's list is never empty (commitLocked deletes it), so
	// nothing dropped is nothing gone.
	kept := make(map[string][]Gate, len(s.gates))
	var dropped []Gate
	for k, v := range s.gates {
		if keep(k) {
			kept[k] = v
		} else {
			dropped = append(dropped, v...)
		}
	}
	if len(dropped) == 0 {
		return nil, nil
	}
	old := s.gates
	s.gates = kept
	if err := s.saveLocked(); err != nil {
		s.gates = old
		return nil, err
	}
	s.publish()
	return dropped, nil
}

// commitLocked makes list the pod's gates, saved first.
func (s *GateStore) commitLocked(podKey string, list []Gate) error {
	old, had := s.gates[podKey]
	if len(list) == 0 {
		delete(s.gates, podKey)
	} else {
		s.gates[podKey] = list
	}
	if err := s.saveLocked(); err != nil {
		if had {
			s.gates[podKey] = old
		} else {
			delete(s.gates, podKey)
		}
		return err
	}
	s.publish()
	return nil
}

func (s *GateStore) saveLocked() error {
	if s.dir == "" {
		return nil
	}
	content := gateFileContent{Version: gateFileFormat.Version, Gates: []Gate{}}
	for _, list := range s.gates {
		content.Gates = append(content.Gates, list...)
	}
	raw, err := json.Marshal(content)
	if err != nil {
		return err
	}
	d, err := statefile.OpenDir(s.dir)
	if err != nil {
		return fmt.Errorf("save the readiness gates: %w", err)
	}
	defer d.Close()
	if err := statefile.Save(d, &gateFileFormat, raw); err != nil {
		return fmt.Errorf("save the %w", err)
	}
	return nil
}

// publish makes a new GateSet of the gates (under mu, or before the store
// is shared).
func (s *GateStore) publish() {
	set := GateSet{byPod: make(map[string][]Condition, len(s.gates))}
	for k, list := range s.gates {
		conds := make([]Condition, 0, len(list))
		for _, g := range list {
			conds = append(conds, Condition{Type: g.Type, Status: g.Status, LastTransitionTime: g.LastTransitionTime})
		}
		set.byPod[k] = conds
	}
	s.set.Store(&set)
	s.version.Add(1)
}

// upsertGate puts g in list (replacing the gate of its type), ordered by
// type.
func upsertGate(list []Gate, g Gate) []Gate {
	if i := slices.IndexFunc(list, func(x Gate) bool { return x.Type == g.Type }); i >= 0 {
		list[i] = g
		return list
	}
	list = append(list, g)
	slices.SortFunc(list, func(a, b Gate) int { return strings.Compare(string(a.Type), string(b.Type)) })
	return list
}
