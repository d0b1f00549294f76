package spec

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cri-prober/cri-prober/pkg/bounded"
)

// DecodeFile decodes data, the file path of a manifest directory, as the
// agent reads it (see decodeFile): as static pods the agent makes with
// static (nil: pods others made); a crictl config in it is skipped.
func DecodeFile(path string, data []byte, static *Static) File {
	return decodeFile(path, data, false, static)
}

// DecodeNamedFile decodes data, a file the user named (validate FILE, play
// FILE, -f -), as DecodeFile does, except that a file that is one crictl
// container or pod sandbox config is validated as one, as the agent reads
// the annotations it gives the container or sandbox: every problem at its
// line in the file, with the field inside the annotation. A config with
// an image is a container config, any other a pod sandbox config.
func DecodeNamedFile(path string, data []byte, static *Static) File {
	return decodeFile(path, data, true, static)
}

// decodeFile reads the documents of a file (several separated by "---"
// lines allowed): Pod manifests are decoded, other Kubernetes objects and
// YAML that is none are skipped with a notice, and what looks like a Pod
// but cannot be one is an error. Bad documents are reported and skipped;
// the good ones are returned. A file given by name (named) that is one
// crictl config is validated as one.
func decodeFile(path string, data []byte, named bool, static *Static) File {
	var f File
	docs := splitDocuments(data)
	var notObjects []*Notice
	for i, doc := range docs {
		root, serr := parseDocument(path, doc)
		if serr != nil {
			f.Errors = append(f.Errors, serr)
			continue
		}
		if root == nil {
			continue
		}
		info := inspect(root)
		source := fmt.Sprintf("%s:%d", path, doc.line)
		switch c := classify(root, info); c.class {
		case classPod:
			pod, errs := loadPod(path, doc, root, info, static)
			f.Errors = append(f.Errors, errs...)
			if pod != nil {
				f.Pods = append(f.Pods, pod)
			}
		case classCRIConfig:
			if named && i == 0 && len(docs) == 1 {
				var errs []*Error
				f.Config, errs = criConfig(path, doc, root, info)
				f.Errors = append(f.Errors, errs...)
				continue
			}
			f.Skipped = append(f.Skipped, &Notice{Source: source, Kind: NoticeCRIConfig, Detail: fmt.Sprintf(
				"not a manifest: a crictl %s (the agent reads its annotations from the runtime once crictl has used it; name the file alone to validate it)", c.what)})
		case classNotObject:
			notObjects = append(notObjects, &Notice{Source: source, Kind: NoticeNotObject, Detail: "not a manifest (" + c.what + ")"})
		case classOtherKind:
			f.Skipped = append(f.Skipped, &Notice{Source: source, Kind: NoticeNotPod, Detail: c.what})
		default: // classError
			line := doc.line
			if c.at != nil {
				line = doc.start + c.at.Line - 1
			}
			f.Errors = append(f.Errors, &Error{Source: fmt.Sprintf("%s:%d", path, line), Detail: c.what})
		}
	}
	if len(notObjects) > 0 && len(notObjects) == len(docs) {
		// Nothing in the file is a Kubernetes object: one notice for it.
		notObjects = []*Notice{{Source: path, Kind: NoticeNotObject, Detail: notObjects[0].Detail}}
	}
	f.Skipped = append(f.Skipped, notObjects...)
	return f
}

// loadPod decodes, defaults and validates a Pod document, every problem at
// its line in the file.
func loadPod(path string, doc document, root *yaml.Node, info *docInfo, static *Static) (*Pod, []*Error) {
	source := fmt.Sprintf("%s:%d", path, doc.line)
	namespace := scalar(lookup(info.metadata, "namespace"))
	if namespace == "" {
		namespace = "default"
	}
	// The extensions annotation holds YAML or JSON of its own.
	extensions := innerDuplicates(lookup(lookup(info.metadata, "annotations"), ExtensionsAnnotation), "metadata.annotations["+ExtensionsAnnotation+"]")
	dups := duplicateErrors(path, doc, slices.Concat(info.duplicates, extensions), Error{Namespace: namespace, Pod: scalar(lookup(info.metadata, "name"))}, podContainer(info.spec))
	pod, errs := decodePod(source, doc.data, root, static.forFile(path))
	// Point at the field itself when the document has it.
	at := func(e *Error) {
		if line := fieldLine(root, errorPath(e)); line > 0 {
			e.Source = fmt.Sprintf("%s:%d", path, doc.start+line-1)
		}
	}
	for _, e := range errs {
		at(e)
	}
	if pod != nil {
		for _, w := range pod.Warnings {
			at(w)
		}
		for _, c := range pod.Containers {
			for _, w := range c.Warnings {
				at(w)
			}
		}
	}
	if len(dups) > 0 {
		// A duplicate key makes the pod something other than what was
		// written: never used.
		return nil, append(dups, errs...)
	}
	if pod != nil {
		pod.File = absolute(path)
	}
	return pod, errs
}

// absolute is path made absolute (as it is when that fails).
func absolute(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// File is what one manifest file holds (DecodeFile), or what a
// directory's listing reports (pkg/manifests).
type File struct {
	Pods    []*Pod
	Errors  []*Error
	Skipped []*Notice
	Config  *CRIConfig // a file given by name that is a crictl config
}

// Combine joins the files' pods in their order, the first definition of
// a pod winning: a pod defined again is an error, wherever it is defined
// again (the same file, a later file of the directory, a later file given
// by name). It gathers the pods' and containers' warnings.
func Combine(files ...File) *Result {
	r := &Result{}
	seen := map[string]string{}
	for _, f := range files {
		r.Errors = append(r.Errors, f.Errors...)
		r.Skipped = append(r.Skipped, f.Skipped...)
		if f.Config != nil {
			r.Configs = append(r.Configs, f.Config)
		}
		for _, p := range f.Pods {
			key := p.Namespace + "/" + p.Name
			if first, dup := seen[key]; dup {
				r.Errors = append(r.Errors, &Error{Source: p.Source, Namespace: p.Namespace, Pod: p.Name,
					Detail: fmt.Sprintf("pod is already defined at %s; this definition is ignored: remove one, or rename this pod", first)})
				continue
			}
			seen[key] = p.Source
			r.Pods = append(r.Pods, p)
		}
	}
	r.collectWarnings()
	return r
}

type document struct {
	line  int // 1-based line of the document's first content
	start int // 1-based line where its text (comments included) starts
	data  []byte
}

// splitDocuments splits a YAML stream on "---" separator lines, keeping
// each document's first line for messages. Empty documents are dropped.
func splitDocuments(data []byte) []document {
	var docs []document
	var cur bytes.Buffer
	start, line := 1, 0
	flush := func() {
		if len(bytes.TrimSpace(stripComments(cur.Bytes()))) > 0 {
			// The document is said to start at its first line of content,
			// past leading comments and blank lines.
			first := start
			for _, l := range bytes.Split(cur.Bytes(), []byte("\n")) {
				if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
					break
				}
				first++
			}
			docs = append(docs, document{line: first, start: start, data: bytes.Clone(cur.Bytes())})
		}
		cur.Reset()
	}
	// Lines of any length: the data is in memory already (and a file is
	// at most pkg/manifests' MaxFileSize), so a line limit would only drop the rest
	// of the file, as bufio.Scanner's did past 16 MiB.
	for rest := data; len(rest) > 0; {
		text := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			text, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		text = bytes.TrimSuffix(text, []byte("\r")) // CRLF files, as bufio.ScanLines
		line++
		if string(text) == "---" || bytes.HasPrefix(text, []byte("--- ")) || bytes.HasPrefix(text, []byte("---\t")) {
			flush()
			start = line + 1
			continue
		}
		cur.Write(text)
		cur.WriteByte('\n')
	}
	flush()
	return docs
}

func stripComments(b []byte) []byte {
	var out bytes.Buffer
	for _, l := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out.Write(l)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// decodePod decodes one Pod document strictly (unknown fields are errors,
// as with kubectl --validate=strict; duplicate keys are found before),
// defaults and validates it. root is the document parsed, for finding
// the field a decoding error is about.
func decodePod(source string, doc []byte, root *yaml.Node, static *staticFile) (*Pod, []*Error) {
	fail := func(e *Error) (*Pod, []*Error) { e.Source = source; return nil, []*Error{e} }
	jsonDoc, err := sigsyaml.YAMLToJSON(doc)
	if err != nil {
		return fail(&Error{Detail: syntaxDetail(err.Error())})
	}
	var pod corev1.Pod
	strict, err := json.UnmarshalStrict(jsonDoc, &pod, json.DisallowDuplicateFields, json.DisallowUnknownFields)
	if err != nil {
		return fail(decodeError(root, err))
	}
	if static != nil && len(strict) == 0 {
		if errs := static.apply(source, &pod); len(errs) > 0 {
			return nil, errs
		}
	}
	defaultPod(&pod)
	if len(strict) > 0 {
		var errs []*Error
		for _, e := range strict {
			errs = append(errs, &Error{Source: source, Namespace: pod.Namespace, Pod: pod.Name, Detail: strictDetail(e, pod)})
		}
		return nil, errs
	}
	errs, warnings := validatePod(source, &pod)
	if len(errs) > 0 {
		return nil, errs
	}
	p := fromPod(source, &pod)
	p.Warnings = warnings[""]
	if static == nil {
		p.Warnings = append(p.Warnings, unpinnedWarnings(source, &pod)...)
	} else {
		for _, w := range localStorageWarnings(&pod.Spec, static.LocalStorageLimits == LocalStorageEnforce) {
			e := &Error{Source: source, Namespace: pod.Namespace, Pod: pod.Name, Container: w.container, Reason: ReasonLocalStorageLimitIgnored}
			e.Field, e.Detail = fromField(w.fe)
			p.Warnings = append(p.Warnings, e)
		}
	}
	for i := range p.Containers {
		p.Containers[i].Warnings = warnings[p.Containers[i].Name]
	}
	if raw, ok := pod.Annotations[ExtensionsAnnotation]; ok {
		var errs []*Error
		for _, fe := range containerExtensions(raw, p.Containers, field.NewPath("metadata", "annotations").Key(ExtensionsAnnotation)) {
			e := &Error{Source: source, Namespace: pod.Namespace, Pod: pod.Name}
			e.Field, e.Detail = fromField(fe)
			errs = append(errs, e)
		}
		if len(errs) > 0 {
			return nil, errs
		}
	}
	return p, nil
}

// unknownField extracts the path of a strict decoder's unknown-field error.
var unknownField = regexp.MustCompile(`unknown field "([^"]+)"`)

// errorPath is the field path an error is about, for finding its line.
func errorPath(e *Error) string {
	if e.Field != "" {
		return e.Field
	}
	if m := unknownField.FindStringSubmatch(e.Detail); m != nil {
		return m[1]
	}
	return ""
}

// cleanJSONError drops the decoder's "json: " prefix, and cuts what it
// quotes of the input (a number's digits) to maxQuoted.
func cleanJSONError(err error) string {
	return bounded.String(strings.TrimPrefix(err.Error(), "json: "), 2*maxQuoted)
}
