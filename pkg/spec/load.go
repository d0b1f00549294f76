package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// ManifestExtensions are the files a manifest directory is read from.
var ManifestExtensions = []string{".yaml", ".yml", ".json"}

// LoadFile reads the Pod manifests in one YAML or JSON file (several
// documents separated by "---" lines allowed). Bad documents are reported
// and skipped; the good ones are returned. Only a regular file (directly or
// through a symbolic link) of at most MaxManifestSize bytes is read: the
// agent's commands read a file as the agent does.
func LoadFile(path string) ([]*Pod, []*Error) {
	pods, errs, _ := loadFile(path)
	return pods, errs
}

// loadFile is LoadFile that also says whether the file is gone (removed
// since it was listed, or a dangling link): its pods go with it.
func loadFile(path string) (pods []*Pod, errs []*Error, gone bool) {
	data, err := readManifest(path)
	if err != nil {
		return nil, []*Error{{Source: path, Detail: err.Error()}}, errors.Is(err, fs.ErrNotExist)
	}
	pods, errs = LoadBytes(path, data)
	return pods, errs, false
}

// LoadBytes is LoadFile for data read from path (which names the source in
// errors).
func LoadBytes(path string, data []byte) ([]*Pod, []*Error) {
	var pods []*Pod
	var errs []*Error
	for _, doc := range splitDocuments(data) {
		source := fmt.Sprintf("%s:%d", path, doc.line)
		pod, docErrs := decodePod(source, doc.data)
		// Point at the field itself when the document has it.
		at := func(e *Error) {
			if line := fieldLine(doc.data, errorPath(e)); line > 0 {
				e.Source = fmt.Sprintf("%s:%d", path, doc.start+line-1)
			}
		}
		for _, e := range docErrs {
			at(e)
		}
		errs = append(errs, docErrs...)
		if pod != nil {
			for _, c := range pod.Containers {
				for _, w := range c.Warnings {
					at(w)
				}
			}
			pods = append(pods, pod)
		}
	}
	return pods, errs
}

// LoadDir reads every manifest file of dir (see ManifestFiles). A pod
// defined twice is an error: the first definition in file-name order wins.
func LoadDir(dir string) ([]*Pod, []*Error) {
	l, err := listDir(dir)
	if err != nil {
		return nil, []*Error{{Source: dir, Detail: err.Error()}}
	}
	loaded := make([]loadedFile, 0, len(l.files))
	for _, f := range l.files {
		pods, errs := LoadFile(f)
		loaded = append(loaded, loadedFile{pods: pods, errs: errs})
	}
	return combine(l.ignored, loaded)
}

// loadedFile is what one manifest file contributes to its directory.
type loadedFile struct {
	pods []*Pod
	errs []*Error
}

// combine joins the files' pods in file-name order, the first definition
// of a pod winning, after the directory's own reports.
func combine(ignored []*Error, files []loadedFile) ([]*Pod, []*Error) {
	var pods []*Pod
	errs := append([]*Error(nil), ignored...)
	seen := map[string]string{}
	for _, f := range files {
		errs = append(errs, f.errs...)
		for _, p := range f.pods {
			key := p.Namespace + "/" + p.Name
			if first, dup := seen[key]; dup {
				errs = append(errs, &Error{Source: p.Source, Namespace: p.Namespace, Pod: p.Name,
					Detail: fmt.Sprintf("pod is already defined at %s; this definition is ignored", first)})
				continue
			}
			seen[key] = p.Source
			pods = append(pods, p)
		}
	}
	return pods, errs
}

// ManifestFiles lists the manifest files of dir in name order: names ending
// in one of ManifestExtensions, at most MaxManifestFiles of them, among the
// first MaxManifestDirEntries entries. Names starting with "." (editor
// leftovers, a ConfigMap volume's ..data) are skipped silently; anything
// else not listed (other names, directories, files past the limits) is
// reported, not silently skipped. Whether a listed name leads to a regular
// file is found out when it is read. err is set when dir cannot be read.
func ManifestFiles(dir string) (files []string, ignored []*Error, err error) {
	l, err := listDir(dir)
	if err != nil {
		return nil, nil, err
	}
	return l.files, l.ignored, nil
}

func hasManifestExtension(name string) bool {
	for _, ext := range ManifestExtensions {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
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
	// at most MaxManifestSize), so a line limit would only drop the rest
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

// decodePod decodes one document strictly (unknown and duplicate fields are
// errors, as with kubectl --validate=strict), defaults and validates it.
func decodePod(source string, doc []byte) (*Pod, []*Error) {
	fail := func(detail string) (*Pod, []*Error) { return nil, []*Error{{Source: source, Detail: detail}} }
	jsonDoc, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return fail(fmt.Sprintf("not valid YAML: %v", err))
	}
	var typeMeta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.UnmarshalCaseSensitivePreserveInts(jsonDoc, &typeMeta); err != nil {
		return fail(fmt.Sprintf("not a Kubernetes object: %v", err))
	}
	if typeMeta.Kind != "Pod" || typeMeta.APIVersion != "v1" {
		return fail(fmt.Sprintf("apiVersion %q, kind %q: only Pod manifests (apiVersion: v1, kind: Pod) are supported", typeMeta.APIVersion, typeMeta.Kind))
	}
	var pod corev1.Pod
	strict, err := json.UnmarshalStrict(jsonDoc, &pod, json.DisallowDuplicateFields, json.DisallowUnknownFields)
	if err != nil {
		return fail(cleanJSONError(err))
	}
	if len(strict) > 0 {
		var errs []*Error
		for _, e := range strict {
			errs = append(errs, &Error{Source: source, Namespace: pod.Namespace, Pod: pod.Name, Detail: cleanJSONError(e)})
		}
		return nil, errs
	}
	defaultPod(&pod)
	errs, warnings := validatePod(source, &pod)
	if len(errs) > 0 {
		return nil, errs
	}
	p := fromPod(source, &pod)
	for i := range p.Containers {
		p.Containers[i].Warnings = warnings[p.Containers[i].Name]
	}
	if raw, ok := pod.Annotations[ExtensionsAnnotation]; ok {
		var errs []*Error
		for _, fe := range containerExtensions(raw, p.Containers, field.NewPath("metadata", "annotations").Key(ExtensionsAnnotation)) {
			errs = append(errs, &Error{Source: source, Namespace: pod.Namespace, Pod: pod.Name, Field: fe.Field, Detail: fe.ErrorBody()})
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

// cleanJSONError drops the decoder's "json: " prefix.
func cleanJSONError(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}
