package spec

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// CRIConfigKind is which crictl config a file holds.
type CRIConfigKind string

const (
	// CRIContainerConfig is what crictl create takes: its annotations
	// carry the container's probes.
	CRIContainerConfig CRIConfigKind = "container config"
	// CRIPodSandboxConfig is what crictl runp takes: its annotations
	// carry the pod's restart policy, grace period and probe network.
	CRIPodSandboxConfig CRIConfigKind = "pod sandbox config"
)

// CRIConfig is a crictl config, read as the agent reads the annotations
// that the container or sandbox made from it carries.
type CRIConfig struct {
	Source string // the file
	Kind   CRIConfigKind
	// Namespace and Pod are a pod sandbox config's metadata; Container is
	// a container config's metadata.name.
	Namespace, Pod, Container string
	// Spec is what a container config's annotations give: its probes
	// (nil: none, or an error).
	Spec *Container
	// Policy is what a pod sandbox config's annotations give (the
	// defaults where they give nothing or an error).
	Policy PodPolicy
}

// criConfig reads a crictl config's annotations as crictl hands them to
// the runtime (a map of strings, decoded as encoding/json decodes it: the
// last of duplicate keys wins, a value that is not a string refuses the
// config) and validates them as the agent does.
func criConfig(path string, doc document, root *yaml.Node, info *docInfo) (*CRIConfig, []*Error) {
	at := func(n *yaml.Node) string {
		line := doc.line
		if n != nil {
			line = doc.start + n.Line - 1
		}
		return fmt.Sprintf("%s:%d", path, line)
	}
	if root == nil || root.Kind != yaml.MappingNode {
		return nil, []*Error{{Source: at(root), Detail: "not a crictl config: a JSON or YAML object (with metadata, and an image for a container) is expected"}}
	}
	c := &CRIConfig{Source: path, Kind: CRIPodSandboxConfig}
	if info.image != nil {
		c.Kind = CRIContainerConfig
		c.Container = scalar(lookup(info.metadata, "name"))
	} else {
		c.Namespace, c.Pod = scalar(lookup(info.metadata, "namespace")), scalar(lookup(info.metadata, "name"))
	}
	base := Error{Namespace: c.Namespace, Pod: c.Pod, Container: c.Container}
	errs := duplicateErrors(path, doc, info.duplicates, base, nil)
	fail := func(n *yaml.Node, fieldPath, detail string) {
		e := base
		e.Source, e.Field, e.Detail = at(n), fieldPath, detail
		errs = append(errs, &e)
	}
	if c.Kind == CRIContainerConfig && c.Container == "" {
		fail(info.metadata, "metadata.name", "Required value: crictl create refuses a container config without it: set metadata.name")
	}

	annotations := annotationsNode(root)
	values := map[string]string{}
	byKey := map[string]*yaml.Node{}
	switch {
	case annotations == nil || annotations.ShortTag() == "!!null":
	case annotations.Kind != yaml.MappingNode:
		fail(annotations, "annotations", "Invalid value: must be a mapping of strings (key: value): crictl refuses the config otherwise")
	default:
		for i := 0; i+1 < len(annotations.Content); i += 2 {
			k, v := annotations.Content[i], annotations.Content[i+1]
			if detail := annotationValueProblem(v); detail != "" {
				fail(v, clip(k.Value), detail)
				continue
			}
			values[k.Value] = v.Value
			if v.ShortTag() == "!!null" {
				values[k.Value] = "" // what encoding/json leaves
			}
			byKey[k.Value] = v
		}
	}

	var read []*Error
	if c.Kind == CRIContainerConfig {
		// As the agent reads them by default: --annotation-probe-hosts is
		// named in the errors it would give.
		c.Spec, read = ContainerFromAnnotations(c.Namespace, c.Pod, c.Container, values, AnnotationProbeHostsPod)
	} else {
		c.Policy, read = PodPolicyFromAnnotations(c.Namespace, c.Pod, values)
	}
	place := func(e *Error) {
		e.Source = at(annotationNode(byKey, e.Field))
	}
	for _, e := range read {
		place(e)
	}
	if c.Spec != nil {
		for _, w := range c.Spec.Warnings {
			place(w)
		}
	}
	errs = append(errs, read...)
	// In the file's order, as an editor shows it.
	sort.SliceStable(errs, func(i, j int) bool { return sourceLine(errs[i].Source) < sourceLine(errs[j].Source) })
	return c, errs
}

// sourceLine is the line of a "file:line" source (0: none).
func sourceLine(source string) int {
	_, line := SplitSource(source)
	return line
}

// SplitSource splits an Error's, a Pod's or a Notice's Source ("file:line",
// or a file alone) into the file and the line (0: none).
func SplitSource(source string) (file string, line int) {
	i := strings.LastIndexByte(source, ':')
	if i < 0 {
		return source, 0
	}
	n, err := strconv.Atoi(source[i+1:])
	if err != nil || n < 1 {
		return source, 0
	}
	return source[:i], n
}

// annotationsNode is a config's annotations, found as encoding/json finds
// a field: by its name, else by its name in another case.
func annotationsNode(root *yaml.Node) *yaml.Node {
	if n := lookup(root, "annotations"); n != nil {
		return n
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if strings.EqualFold(root.Content[i].Value, "annotations") {
			return root.Content[i+1]
		}
	}
	return nil
}

// annotationValueProblem says why crictl refuses an annotation's value
// (anything but a string or null), with the string to write instead.
func annotationValueProblem(v *yaml.Node) string {
	if v.Kind == yaml.ScalarNode {
		switch v.ShortTag() {
		case "!!str", "!!null":
			return ""
		}
		return fmt.Sprintf("Invalid value: %s: annotation values are strings, and crictl refuses the config otherwise: quote it: %q", clip(v.Value), clip(v.Value))
	}
	what := "a mapping"
	if v.Kind == yaml.SequenceNode {
		what = "a list"
	}
	detail := fmt.Sprintf("Invalid value: %s: annotation values are strings, and crictl refuses the config otherwise: write it as a JSON string", what)
	if out, err := yaml.Marshal(v); err == nil {
		if j, err := sigsyaml.YAMLToJSON(out); err == nil && len(j) <= 512 {
			detail += ": " + strconv.Quote(strings.TrimSpace(string(j)))
		}
	}
	return detail
}

// annotationNode is the value of the annotation an error's field is about
// (the field is the key, cut as errors quote it, or the key then a path
// inside its value), or the node inside it when the value is a literal
// block that has that path; nil if none.
func annotationNode(byKey map[string]*yaml.Node, fieldPath string) *yaml.Node {
	var key, quoted string
	for k := range byKey {
		q := clip(k)
		if len(q) > len(quoted) && (fieldPath == q || strings.HasPrefix(fieldPath, q+".") || strings.HasPrefix(fieldPath, q+"[")) {
			key, quoted = k, q
		}
	}
	v := byKey[key]
	if v == nil {
		return nil
	}
	if rest := strings.TrimPrefix(fieldPath[len(quoted):], "."); rest != "" {
		if line := nodeLine(v, splitPath(rest), 0); line > 0 {
			return &yaml.Node{Line: line}
		}
	}
	return v
}
