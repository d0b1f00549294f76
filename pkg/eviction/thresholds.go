package eviction

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal is an eviction signal, as kubelet names it (eviction/api).
type Signal string

// kubelet's eviction signals. The agent acts on the disk ones
// (nodefs.*, imagefs.*); the others are accepted, as kubelet's
// --eviction-hard takes them, and bind nothing here (the agent evicts no
// pod for memory or PIDs: every pod it makes is static, and kubelet
// evicts no static pod).
const (
	SignalMemoryAvailable            Signal = "memory.available"
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	SignalNodeFsAvailable            Signal = "nodefs.available"
	SignalNodeFsInodesFree           Signal = "nodefs.inodesFree"
	SignalImageFsAvailable           Signal = "imagefs.available"
	SignalImageFsInodesFree          Signal = "imagefs.inodesFree"
	SignalContainerFsAvailable       Signal = "containerfs.available"
	SignalContainerFsInodesFree      Signal = "containerfs.inodesFree"
	SignalPIDAvailable               Signal = "pid.available"
)

var validSignals = []Signal{SignalMemoryAvailable, SignalAllocatableMemoryAvailable, SignalNodeFsAvailable, SignalNodeFsInodesFree,
	SignalImageFsAvailable, SignalImageFsInodesFree, SignalContainerFsAvailable, SignalContainerFsInodesFree, SignalPIDAvailable}

// DefaultEvictionHard is kubelet's evictionHard on Linux
// (eviction/defaults_linux.go).
var DefaultEvictionHard = map[string]string{
	"memory.available":   "100Mi",
	"nodefs.available":   "10%",
	"nodefs.inodesFree":  "5%",
	"imagefs.available":  "15%",
	"imagefs.inodesFree": "5%",
}

// Threshold is one hard eviction threshold: the signal's available
// amount is below Quantity, or below Percentage of the capacity.
type Threshold struct {
	Signal     Signal
	Quantity   *resource.Quantity // nil: Percentage
	Percentage float32            // of the capacity, 0..1
	text       string             // as written, for String
}

// String is the threshold as --eviction-hard writes it.
func (t Threshold) String() string {
	if t.text != "" {
		return fmt.Sprintf("%s<%s", t.Signal, t.text)
	}
	if t.Quantity != nil {
		return fmt.Sprintf("%s<%s", t.Signal, t.Quantity.String())
	}
	return fmt.Sprintf("%s<%s%%", t.Signal, strconv.FormatFloat(float64(t.Percentage)*100, 'g', 6, 64))
}

// Value is the threshold's amount against capacity (kubelet's
// GetThresholdQuantity).
func (t Threshold) Value(capacity int64) int64 {
	if t.Quantity != nil {
		return t.Quantity.Value()
	}
	return int64(float64(capacity) * float64(t.Percentage))
}

// ParseThresholds is kubelet's parseThresholdStatements for
// evictionHard: a signal kubelet does not know is an error, a 0% or 100%
// threshold is dropped, a percentage is within 0..100%, a quantity
// positive. The thresholds are in the signals' order.
func ParseThresholds(statements map[string]string) ([]Threshold, error) {
	var out []Threshold
	for _, key := range slices.Sorted(maps.Keys(statements)) {
		signal, val := Signal(key), statements[key]
		if !slices.Contains(validSignals, signal) {
			return nil, fmt.Errorf("unsupported eviction signal %v", signal)
		}
		if strings.HasSuffix(val, "%") {
			if val == "0%" || val == "100%" {
				continue
			}
			f, err := strconv.ParseFloat(strings.TrimRight(val, "%"), 32)
			if err != nil {
				return nil, fmt.Errorf("eviction threshold %v: %w", signal, err)
			}
			p := float32(f) / 100
			if p < 0 {
				return nil, fmt.Errorf("eviction percentage threshold %v must be >= 0%%: %s", signal, val)
			}
			if p > 1 {
				return nil, fmt.Errorf("eviction percentage threshold %v must be <= 100%%: %s", signal, val)
			}
			out = append(out, Threshold{Signal: signal, Percentage: p, text: val})
			continue
		}
		q, err := resource.ParseQuantity(val)
		if err != nil {
			return nil, fmt.Errorf("eviction threshold %v: %w", signal, err)
		}
		if q.Sign() <= 0 {
			return nil, fmt.Errorf("eviction threshold %v must be positive: %s", signal, &q)
		}
		out = append(out, Threshold{Signal: signal, Quantity: &q, text: val})
	}
	return out, nil
}

// ParseEvictionHard reads --eviction-hard as kubelet's flag does
// (cliflag's LangleSeparatedMapStringString): "signal<value" pairs
// separated by commas, e.g. "nodefs.available<10%,imagefs.available<15%".
// An empty string is an empty map.
func ParseEvictionHard(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "<")
		if !ok {
			return nil, fmt.Errorf("malformed pair, expect string<string: %q", pair)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// FormatEvictionHard writes a map as --eviction-hard takes it, sorted.
func FormatEvictionHard(m map[string]string) string {
	pairs := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		pairs = append(pairs, k+"<"+m[k])
	}
	return strings.Join(pairs, ",")
}
