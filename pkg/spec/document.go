package spec

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// parseDocument parses one document of a file as YAML (JSON is YAML too).
// A syntax error is returned at its line in the file, with what to do.
func parseDocument(path string, doc document) (*yaml.Node, *Error) {
	var root yaml.Node
	err := yaml.Unmarshal(doc.data, &root)
	if err == nil {
		if len(root.Content) == 0 {
			return nil, nil
		}
		return root.Content[0], nil
	}
	line := syntaxErrorLine(doc.data, err.Error())
	return nil, &Error{Source: fmt.Sprintf("%s:%d", path, doc.start+line-1), Detail: syntaxDetail(err.Error())}
}

// yamlError splits go-yaml's "yaml: line N: message".
var yamlError = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// syntaxErrorLine finds the line (1-based, in data) of a syntax error.
// go-yaml's own "line N" cannot be used: a parser error gives the line,
// counted from 0, of the construct it was parsing (a mapping that began
// lines earlier), a scanner error its own line counted from 1. The line
// found is the first one up to which the text fails with the same error:
// the parser reads as a stream, so the text after the problem does not
// change the error, and a shorter text does not reach it. (A prefix that
// ends inside a quoted scalar or a flow collection fails too, at its end,
// but with another error, or another construct's line.) A binary search,
// so that a document costs a few parses; in a document larger than
// maxSearchedDocument (a Pod manifest is a few KiB) go-yaml's line is
// taken as it is, corrected to count from 1, so that a large broken file
// cannot cost the agent seconds at every edit.
func syntaxErrorLine(data []byte, msg string) int {
	ends := lineEnds(data)
	if len(ends) == 0 {
		return 1
	}
	if len(data) > maxSearchedDocument {
		return goYAMLLine(msg)
	}
	same := func(n int) bool {
		var node yaml.Node
		err := yaml.Unmarshal(data[:ends[n-1]], &node)
		return err != nil && sameSyntaxError(err.Error(), msg)
	}
	lo, hi := 1, len(ends) // the whole text fails: same(len(ends))
	for lo < hi {
		mid := lo + (hi-lo)/2
		if same(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// maxSearchedDocument is the largest document whose syntax error is looked
// for line by line.
const maxSearchedDocument = 64 << 10

// goYAMLLine is the line go-yaml gives an error: a parser error's ("did
// not find expected …") counts from 0, a scanner error's from 1, and none
// is given on the first line.
func goYAMLLine(msg string) int {
	m := yamlError.FindStringSubmatch(msg)
	if m == nil || m[1] == "" {
		return 1
	}
	n, _ := strconv.Atoi(m[1])
	if strings.HasPrefix(m[2], "did not find expected") {
		n++
	}
	return n
}

// sameSyntaxError compares two of go-yaml's errors. One at the end of the
// text (a quote or bracket never closed) is reported at the last line,
// which differs with the length of the text: its message alone counts.
func sameSyntaxError(a, b string) bool {
	if a == b {
		return true
	}
	ma, mb := yamlError.FindStringSubmatch(a), yamlError.FindStringSubmatch(b)
	return ma != nil && mb != nil && ma[2] == mb[2] && strings.Contains(ma[2], "end of stream")
}

// lineEnds returns the offset just past each line of data.
func lineEnds(data []byte) []int {
	var ends []int
	for i := 0; i < len(data); {
		j := bytes.IndexByte(data[i:], '\n')
		if j < 0 {
			ends = append(ends, len(data))
			break
		}
		i += j + 1
		ends = append(ends, i)
	}
	return ends
}

// syntaxHints say what to do about go-yaml's usual syntax errors.
var syntaxHints = []struct{ problem, hint string }{
	{"did not find expected key", "a line is indented differently from the keys beside it: align it with them, or indent it under the key it belongs to"},
	{"mapping values are not allowed", "a \"key: value\" where a plain value was expected: check the indentation, and quote a value that contains \": \""},
	{"did not find expected '-' indicator", "a list item is not aligned with the items before it: align its \"-\""},
	{"did not find expected ',' or ']'", "a \"[\" is not closed, or a comma is missing between its items: close it or add the comma"},
	{"did not find expected ',' or '}'", "a \"{\" is not closed, or a comma is missing between its entries: close it or add the comma"},
	{"could not find expected ':'", "a key without its \":\": add it, or quote the value"},
	{"found character that cannot start any token", "indent with spaces, not tabs, and quote a value that starts with @ or `"},
	{"end of stream", "a quote or bracket opened here is never closed: close it"},
	{"found a tab character", "indent with spaces, not tabs"},
	{"did not find expected node content", "a value is missing here: add it, or remove the stray character"},
	{"unknown anchor", "an alias (*name) names no anchor (&name) before it: define the anchor or write the value"},
}

// syntaxDetail says what a syntax error is and what to do about it.
func syntaxDetail(err string) string {
	msg := err
	if m := yamlError.FindStringSubmatch(err); m != nil {
		msg = m[2]
	}
	for _, h := range syntaxHints {
		if strings.Contains(msg, h.problem) {
			return fmt.Sprintf("not valid YAML or JSON: %s: %s", msg, h.hint)
		}
	}
	return fmt.Sprintf("not valid YAML or JSON: %s: fix the syntax at this line", msg)
}

// docInfo is what a parsed document is, found before it is decoded.
type docInfo struct {
	apiVersion, kind *yaml.Node // top-level keys (nil: absent)
	metadata         *yaml.Node // its value (nil: absent)
	spec             *yaml.Node
	image            *yaml.Node // a CRI container config's image
	// containers: it defines containers somewhere (a key containers or
	// initContainers holding a list), as a workload's pod template does.
	containers bool
	duplicates []duplicateKey
}

// duplicateKey is a key given twice in one mapping.
type duplicateKey struct {
	path        string // the key's field path
	key         string
	line, first int // lines in the document: this one and the first
}

// maxNesting bounds the walk of a document: a manifest is a few levels
// deep, and hostile input must not exhaust the stack.
const maxNesting = 200

// inspect walks a parsed document once: its type keys, whether it defines
// containers, and every key given twice in one mapping at any depth (a
// decoder keeps the last one silently).
func inspect(root *yaml.Node) *docInfo {
	info := &docInfo{}
	if root == nil {
		return info
	}
	if root.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(root.Content); i += 2 {
			v := root.Content[i+1]
			switch root.Content[i].Value {
			case "apiVersion":
				info.apiVersion = v
			case "kind":
				info.kind = v
			case "metadata":
				info.metadata = v
			case "spec":
				info.spec = v
			case "image":
				info.image = v
			}
		}
	}
	info.walk(root, "", make([]pathPart, 0, 16), 0)
	return info
}

// walk looks at n, at the path base then steps (a key: index -1; a list's
// item: its index, no key), a stack that grows and shrinks with the walk.
// The path is written out only for a duplicate: a document has hundreds of
// keys, and hardly ever a duplicate.
func (info *docInfo) walk(n *yaml.Node, base string, steps []pathPart, depth int) {
	if depth > maxNesting {
		return
	}
	switch n.Kind {
	case yaml.SequenceNode:
		for i, item := range n.Content {
			info.walk(item, base, append(steps, pathPart{index: i}), depth+1)
		}
	case yaml.MappingNode:
		first := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" || k.Value == "<<" {
				continue // merge keys merge; complex keys are not fields
			}
			child := append(steps, pathPart{key: k.Value, index: -1})
			if line, dup := first[k.Value]; dup {
				info.duplicates = append(info.duplicates, duplicateKey{path: stepsPath(base, child), key: k.Value, line: k.Line, first: line})
			} else {
				first[k.Value] = k.Line
			}
			if (k.Value == "containers" || k.Value == "initContainers") && v.Kind == yaml.SequenceNode {
				info.containers = true
			}
			info.walk(v, base, child, depth+1)
		}
	}
}

// stepsPath writes out the path of walk's steps from base.
func stepsPath(base string, steps []pathPart) string {
	path := base
	for _, s := range steps {
		if s.index >= 0 {
			path += "[" + strconv.Itoa(s.index) + "]"
		} else {
			path = childPath(path, s.key)
		}
	}
	return path
}

// fieldName is a key written as a field of a path (a.b); others are
// written as map keys (a[b]), as Kubernetes field paths write them.
var fieldName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// childPath is the path of key in the mapping at path, the key cut to
// maxQuoted.
func childPath(path, key string) string {
	key = clip(key)
	switch {
	case path == "" && fieldName.MatchString(key):
		return key
	case fieldName.MatchString(key):
		return path + "." + key
	default:
		return path + "[" + key + "]"
	}
}

// scalar is a node's value if it is a scalar, else "".
func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// lookup returns the value of key in a mapping node, or nil.
func lookup(n *yaml.Node, key string) *yaml.Node {
	_, v := lookupKey(n, key)
	return v
}

// lookupKey returns the key node and the value of key in a mapping node,
// or nils.
func lookupKey(n *yaml.Node, key string) (k, v *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

// innerDocument parses a string that holds YAML or JSON (an annotation's
// value) as a document of its own: its root, or nil if v is no such
// string. Its lines count from the string's first: inside a literal block
// ("|"), the line after v's.
func innerDocument(v *yaml.Node) *yaml.Node {
	if v == nil || v.Kind != yaml.ScalarNode {
		return nil
	}
	var inner yaml.Node
	if yaml.Unmarshal([]byte(v.Value), &inner) != nil || len(inner.Content) == 0 {
		return nil
	}
	return inner.Content[0]
}

// innerDuplicates are the duplicate keys in a string that holds YAML or
// JSON (an annotation's value), path being the string's, at lines of the
// outer document: their own inside a literal block ("|"), else the
// string's.
func innerDuplicates(v *yaml.Node, path string) []duplicateKey {
	inner := innerDocument(v)
	if inner == nil {
		return nil // not YAML: reported when decoded
	}
	info := &docInfo{}
	info.walk(inner, path, make([]pathPart, 0, 16), 0)
	for i := range info.duplicates {
		d := &info.duplicates[i]
		if v.Style&yaml.LiteralStyle != 0 {
			d.line, d.first = v.Line+d.line, v.Line+d.first
		} else {
			d.line, d.first = v.Line, v.Line
		}
	}
	return info.duplicates
}

// duplicateErrors reports a document's duplicate keys at their lines in the
// file. container names the container a path is in (or "").
func duplicateErrors(path string, doc document, dups []duplicateKey, base Error, container func(string) string) []*Error {
	var errs []*Error
	for _, d := range dups {
		e := base
		e.Source = fmt.Sprintf("%s:%d", path, doc.start+d.line-1)
		e.Field = d.path
		if container != nil {
			e.Container = container(d.path)
		}
		e.Detail = fmt.Sprintf("duplicate key %q (first at line %d): remove one; a decoder would silently keep only the last", clip(d.key), doc.start+d.first-1)
		errs = append(errs, &e)
	}
	return errs
}

// podContainer names the container of a Pod document that a field path is
// in: spec.containers[i] or spec.initContainers[i].
func podContainer(spec *yaml.Node) func(string) string {
	return func(path string) string {
		for _, list := range []string{"containers", "initContainers"} {
			prefix := "spec." + list + "["
			if !strings.HasPrefix(path, prefix) {
				continue
			}
			end := strings.IndexByte(path[len(prefix):], ']')
			if end < 0 {
				return ""
			}
			i, err := strconv.Atoi(path[len(prefix) : len(prefix)+end])
			items := lookup(spec, list)
			if err != nil || items == nil || items.Kind != yaml.SequenceNode || i >= len(items.Content) {
				return ""
			}
			return scalar(lookup(items.Content[i], "name"))
		}
		return ""
	}
}

// docClass is what a document is to the loader.
type docClass int

const (
	classPod       docClass = iota // a Pod manifest: decoded
	classCRIConfig                 // a crictl config (no apiVersion or kind, a metadata mapping, no spec)
	classNotObject                 // not a Kubernetes object: skipped with a notice
	classOtherKind                 // an object that defines no containers (a Service): skipped with a notice
	classError                     // meant as a Pod, or holding containers, but not one: an error
)

// classification is a document's class, with what to say about it.
type classification struct {
	class docClass
	// what: for a notice or an error, its detail; for a crictl config,
	// which one (a CRIConfigKind).
	what string
	at   *yaml.Node // an error's node, for its line (nil: the document's first)
}

// classify decides what a document is. Only Pods are read, as kubelet
// reads static pods; a Kubernetes object that defines containers (a
// Deployment's pod template, a list of pods) is an error, since its
// containers would be neither run nor probed while the file sits among
// the manifests as if they were; other objects (a Service, a ConfigMap)
// and YAML that is no Kubernetes object (a values file) are skipped with
// a notice, since nothing in them could be probed.
func classify(root *yaml.Node, info *docInfo) classification {
	apiVersion, kind := clip(scalar(info.apiVersion)), clip(scalar(info.kind))
	typed := info.apiVersion != nil || info.kind != nil
	switch {
	case !typed && info.containers:
		return classification{class: classError, what: "apiVersion and kind are missing: add apiVersion: v1 and kind: Pod"}
	case !typed && info.metadata != nil && info.metadata.Kind == yaml.MappingNode && info.spec == nil:
		if info.image != nil {
			return classification{class: classCRIConfig, what: string(CRIContainerConfig)}
		}
		return classification{class: classCRIConfig, what: string(CRIPodSandboxConfig)}
	case !typed:
		return classification{class: classNotObject, what: notObjectReason(root)}
	case kind == "Pod" && apiVersion == "v1":
		return classification{class: classPod}
	case kind == "Pod" && apiVersion == "":
		return classification{class: classError, what: "apiVersion is missing: add apiVersion: v1", at: info.kind}
	case kind == "Pod":
		return classification{class: classError, what: fmt.Sprintf("apiVersion %q: a Pod's apiVersion is v1: set apiVersion: v1", apiVersion), at: info.apiVersion}
	case kind == "" && info.containers:
		return classification{class: classError, what: "kind is missing: add kind: Pod", at: info.apiVersion}
	case kind == "":
		return classification{class: classNotObject, what: "apiVersion without kind"}
	case info.containers && (kind == "List" || kind == "PodList"):
		return classification{class: classError, at: info.kind, what: fmt.Sprintf(
			"kind %s: only single Pods are read: write each pod as a document of its own, separated by \"---\" lines", kind)}
	case info.containers:
		return classification{class: classError, at: info.kind, what: fmt.Sprintf(
			"kind %s (%s): only Pods are read, as kubelet reads static pods: the containers of this %s are neither run nor probed; write them in a Pod manifest (apiVersion: v1, kind: Pod), or move the file out of the directory", kind, apiVersion, kind)}
	default:
		return classification{class: classOtherKind, what: fmt.Sprintf("kind %s (%s): not a Pod: nothing in it is probed", kind, apiVersion)}
	}
}

// notObjectReason says why a document is not a Kubernetes object.
func notObjectReason(root *yaml.Node) string {
	switch root.Kind {
	case yaml.MappingNode:
		return "no apiVersion or kind"
	case yaml.SequenceNode:
		return "a list, not a Kubernetes object"
	default:
		return "text, not a Kubernetes object"
	}
}
