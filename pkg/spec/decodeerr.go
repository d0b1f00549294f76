package spec

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/json"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

// maxQuoted is the most of a manifest's or an annotation's own text (a
// value, a key, a kind) that a message quotes: any real one fits, and a
// hostile 1 MiB value is not copied into every error and log line.
const maxQuoted = 256

// clip cuts text from a manifest or an annotation to maxQuoted for a
// message, saying how much was cut.
func clip(s string) string { return bounded.String(s, maxQuoted) }

// fromField is a field error as an Error's Field and Detail, what it
// quotes of the input (its bad value, a key or a name in its path) cut to
// maxQuoted: the value is quoted as the API server quotes it, but never
// whole.
func fromField(fe *field.Error) (path, detail string) {
	quoted := *fe
	if v := reflect.ValueOf(quoted.BadValue); v.Kind() == reflect.String && v.Len() > maxQuoted {
		quoted.BadValue = reflect.ValueOf(clip(v.String())).Convert(v.Type()).Interface() // its own type: quoted the same way
	}
	return clip(quoted.Field), quoted.ErrorBody()
}

// jsonTypeError matches the decoder's type errors, e.g. "json: cannot
// unmarshal string into Go struct field Probe.spec.containers.livenessProbe.
// periodSeconds of type int32". The field path has no list indices.
var jsonTypeError = regexp.MustCompile(`^json: cannot unmarshal (\S+(?: \S+)?) into Go struct field [^.]+\.(\S+) of type (.+)$`)

// decodeError turns a decoder's error into one that names the field (found
// in the parsed document, list indices included) and says what to write.
func decodeError(root *yaml.Node, err error) *Error {
	m := jsonTypeError.FindStringSubmatch(err.Error())
	if m == nil {
		return &Error{Detail: cleanJSONError(err)}
	}
	value, dotted, goType := m[1], m[2], m[3]
	jsonType, literal, _ := strings.Cut(value, " ") // "number 1.5": the number too
	path := locateValue(root, dotted, jsonType, literal)
	if path == "" {
		path = clip(dotted)
	}
	want, hint := expectedValue(goType)
	if literal != "" && strings.Contains(want, "whole number") {
		return &Error{Field: path, Detail: fmt.Sprintf("Invalid value: %s: must be %s: write a whole number in its range", clip(literal), want)}
	}
	found := map[string]string{"string": "a string", "number": "a number", "bool": "a boolean", "array": "a list", "object": "a mapping"}[jsonType]
	if found == "" {
		found = clip(value)
	}
	return &Error{Field: path, Detail: fmt.Sprintf("Invalid value: %s: must be %s: %s", found, want, hint)}
}

// expectedValue says what a Go type takes in YAML, and how to write it.
func expectedValue(goType string) (want, hint string) {
	switch {
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return "a whole number (" + goType + ")", "write the number without quotes"
	case strings.HasPrefix(goType, "float"):
		return "a number", "write the number without quotes"
	case goType == "string":
		return "a string", "quote the value"
	case goType == "bool":
		return "true or false", "write true or false, without quotes"
	case strings.HasPrefix(goType, "[]"):
		return "a list", `write its items as "- item" lines, or as [a, b]`
	case strings.HasPrefix(goType, "map["):
		return "a mapping", `write it as "key: value" lines`
	default:
		return "a mapping of the fields of " + goType, "indent its fields under the key"
	}
}

// locateValue finds the field a type error is about: dotted is its path
// without list indices, jsonType the kind of value the decoder found
// ("string", "number", "bool", "array", "object") and literal the value
// itself when the decoder says it (a number). It returns the path with
// indices of the first value of that kind at that path (in a list or map
// there, the first element of that kind), else of the first value at the
// path, else "".
func locateValue(root *yaml.Node, dotted, jsonType, literal string) string {
	is := func(n *yaml.Node) bool { return isJSONType(n, jsonType) && (literal == "" || n.Value == literal) }
	parts := strings.Split(dotted, ".")
	var first, typed string
	var walk func(n *yaml.Node, i int, path string, depth int)
	walk = func(n *yaml.Node, i int, path string, depth int) {
		if typed != "" || n == nil || depth > maxNesting {
			return
		}
		if n.Kind == yaml.SequenceNode && i < len(parts) {
			for j, item := range n.Content {
				walk(item, i, fmt.Sprintf("%s[%d]", path, j), depth+1)
			}
			return
		}
		if i < len(parts) {
			walk(lookup(n, parts[i]), i+1, childPath(path, parts[i]), depth+1)
			return
		}
		if first == "" {
			first = path
		}
		if is(n) {
			typed = path
			return
		}
		// A list's or a map's element of the wrong kind.
		switch n.Kind {
		case yaml.SequenceNode:
			for j, item := range n.Content {
				if is(item) {
					typed = fmt.Sprintf("%s[%d]", path, j)
					return
				}
			}
		case yaml.MappingNode:
			for j := 0; j+1 < len(n.Content); j += 2 {
				if is(n.Content[j+1]) {
					typed = childPath(path, n.Content[j].Value)
					return
				}
			}
		}
	}
	walk(root, 0, "", 0)
	if typed != "" {
		return typed
	}
	return first
}

// isJSONType reports whether a YAML node becomes that kind of JSON value.
func isJSONType(n *yaml.Node, jsonType string) bool {
	switch jsonType {
	case "array":
		return n.Kind == yaml.SequenceNode
	case "object":
		return n.Kind == yaml.MappingNode
	}
	if n.Kind != yaml.ScalarNode {
		return false
	}
	tag := n.ShortTag()
	switch jsonType {
	case "string":
		return tag == "!!str"
	case "number":
		return tag == "!!int" || tag == "!!float"
	case "bool":
		return tag == "!!bool"
	}
	return false
}

// strictDetail says what a strict decoder's error (an unknown or duplicate
// field) is and what to do about it; into is what was decoded (a value of
// its type), for suggesting a field's name. The field's path is quoted
// as the decoder quotes it, cut to maxQuoted.
func strictDetail(err error, into any) string {
	var fe json.FieldError
	if !errors.As(err, &fe) {
		return cleanJSONError(err)
	}
	path := fe.FieldPath()
	kind, _, _ := strings.Cut(cleanJSONError(err), ` "`) // "unknown field", "duplicate field"
	msg := kind + " " + strconv.Quote(clip(path))
	switch kind {
	case "unknown field":
		if s := suggestField(reflect.TypeOf(into), path); s != "" {
			return fmt.Sprintf("%s: remove it, or correct its name: did you mean %q?", msg, s)
		}
		return msg + ": remove it, or correct its name (names are case-sensitive)"
	case "duplicate field":
		return msg + ": remove one"
	}
	return msg
}

// suggestField returns the field closest to the last part of an unknown
// field's path in t (a different case, or a letter or two off), or "".
func suggestField(t reflect.Type, path string) string {
	parts := splitPath(path)
	if len(parts) == 0 {
		return ""
	}
	for _, part := range parts[:len(parts)-1] {
		if t = fieldType(t, part.key); t == nil {
			return ""
		}
		if part.index >= 0 {
			if t.Kind() != reflect.Slice {
				return ""
			}
			t = deref(t.Elem())
		}
	}
	return closest(parts[len(parts)-1].key, jsonFields(t))
}

// closest returns the candidate that name most likely misspells: the same
// but for case, else one at most two letters off; "" if none is. A name
// whose length is that far from every candidate's costs nothing more: a
// hostile 1 MiB key is not compared letter by letter.
func closest(name string, candidates []string) string {
	best, bestDistance := "", 3
	for _, candidate := range candidates {
		if d := len(candidate) - len(name); d >= bestDistance || -d >= bestDistance {
			continue // the distance is at least the difference in length
		}
		if strings.EqualFold(candidate, name) {
			return candidate
		}
		if d := editDistance(strings.ToLower(candidate), strings.ToLower(name)); d < bestDistance {
			best, bestDistance = candidate, d
		}
	}
	return best
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// fieldType is the type of a struct's field by its JSON name, or of a
// map's values; nil if there is none.
func fieldType(t reflect.Type, name string) reflect.Type {
	t = deref(t)
	switch t.Kind() {
	case reflect.Map:
		return deref(t.Elem())
	case reflect.Struct:
	default:
		return nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && tag == "":
			if ft := fieldType(f.Type, name); ft != nil {
				return ft
			}
		case tag == name:
			return deref(f.Type)
		}
	}
	return nil
}

// jsonFields lists a struct's JSON field names, inline ones included.
func jsonFields(t reflect.Type) []string {
	t = deref(t)
	if t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && tag == "":
			names = append(names, jsonFields(f.Type)...)
		case tag != "" && tag != "-":
			names = append(names, tag)
		}
	}
	return names
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
