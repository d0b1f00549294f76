package spec

import (
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// fieldLine returns the line (1-based, within the document root was parsed
// from) of the field at path, a Kubernetes field path such as
// spec.containers[0].livenessProbe.httpGet.port, or of the deepest part of
// it that exists; 0 if none does. A path that goes on into a string written
// as a literal block ("|": an annotation holding YAML or JSON) is followed
// into it.
func fieldLine(root *yaml.Node, path string) int {
	if root == nil {
		return 0
	}
	return nodeLine(root, splitPath(path), 0)
}

func nodeLine(node *yaml.Node, parts []pathPart, depth int) int {
	line := 0
	for i, part := range parts {
		if node.Kind == yaml.ScalarNode && node.Style&yaml.LiteralStyle != 0 && depth < 2 {
			// A document in a string: its first line is the one after
			// the "|".
			if inner := innerDocument(node); inner != nil {
				if at := nodeLine(inner, parts[i:], depth+1); at > 0 {
					return node.Line + at
				}
			}
			break
		}
		next, at := step(node, part)
		if next == nil {
			break
		}
		node, line = next, at
	}
	return line
}

type pathPart struct {
	key   string
	index int // -1: none
}

// splitPath splits a field path at dots outside brackets: "a.b[2]" is a,
// b index 2; "metadata.annotations[cri-prober.io/x]" is metadata,
// annotations, then the key cri-prober.io/x.
func splitPath(path string) []pathPart {
	var parts []pathPart
	for path != "" {
		end := strings.IndexAny(path, ".[")
		if end < 0 {
			end = len(path)
		}
		if end > 0 {
			parts = append(parts, pathPart{key: path[:end], index: -1})
		}
		path = path[end:]
		if strings.HasPrefix(path, ".") {
			path = path[1:]
			continue
		}
		if strings.HasPrefix(path, "[") {
			closing := strings.IndexByte(path, ']')
			if closing < 0 {
				break
			}
			inner := path[1:closing]
			path = strings.TrimPrefix(path[closing+1:], ".")
			if i, err := strconv.Atoi(inner); err == nil && len(parts) > 0 {
				parts[len(parts)-1].index = i
			} else {
				parts = append(parts, pathPart{key: inner, index: -1})
			}
		}
	}
	return parts
}

// step follows one part of a path from a mapping node: the key, then the
// sequence index if any. It returns the node reached and the line to report.
func step(node *yaml.Node, part pathPart) (*yaml.Node, int) {
	key, value := lookupKey(node, part.key)
	switch {
	case value == nil:
		return nil, 0
	case part.index < 0:
		return value, key.Line
	case value.Kind != yaml.SequenceNode || part.index >= len(value.Content):
		return nil, 0
	}
	item := value.Content[part.index]
	return item, item.Line
}
