package spec

import "os"

// load decodes the file path as pkg/manifests' Load reads a file given by
// name (static nil: pods others made).
func load(path string, static *Static) *Result {
	data, err := os.ReadFile(path)
	if err != nil {
		return &Result{Errors: []*Error{{Source: path, Detail: "cannot read it: " + err.Error()}}}
	}
	return loadData(path, data, static)
}

// loadData decodes data as a file given by name, as pkg/manifests'
// LoadData does.
func loadData(source string, data []byte, static *Static) *Result {
	return Combine(DecodeNamedFile(source, data, static))
}

// loadPods loads data as a file of a manifest directory: its pods and
// errors.
func loadPods(path string, data []byte) ([]*Pod, []*Error) {
	f := DecodeFile(path, data, nil)
	return f.Pods, f.Errors
}

func messages(errs []*Error) []string {
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return msgs
}

func notices(skipped []*Notice) []string {
	var msgs []string
	for _, n := range skipped {
		msgs = append(msgs, n.String())
	}
	return msgs
}
