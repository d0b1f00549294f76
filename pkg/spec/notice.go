package spec

// Notice says that a file, or a document of one, was skipped: not read as
// a Pod manifest, and not an error either, since nothing in it was meant to
// be probed (a README, a values file, a Service).
type Notice struct {
	Source string // the file, or file:line of one document in it
	Kind   NoticeKind
	Detail string // why, e.g. "not a manifest (.md)"
}

// String is the notice as the commands print it:
// "skipped README.md: not a manifest (.md)".
func (n *Notice) String() string { return "skipped " + n.Source + ": " + n.Detail }

// NoticeKind is why something was skipped.
type NoticeKind int

const (
	// NoticeNotManifestFile: a file of a manifest directory whose name
	// does not end in one of pkg/manifests' Extensions.
	NoticeNotManifestFile NoticeKind = iota + 1
	// NoticeDirectory: a subdirectory (manifests in it are not read).
	NoticeDirectory
	// NoticeNotObject: YAML or JSON that is not a Kubernetes object (no
	// apiVersion or kind).
	NoticeNotObject
	// NoticeNotPod: a Kubernetes object of another kind that defines no
	// containers (a Service, a ConfigMap).
	NoticeNotPod
	// NoticeCRIConfig: a crictl config in a manifest directory. Given by
	// name (DecodeNamedFile), it is validated instead.
	NoticeCRIConfig
)

// Result is what the files read found (Combine).
type Result struct {
	// Pods are the valid pods of the manifests, the first definition of
	// a pod winning.
	Pods []*Pod
	// Configs are the crictl configs validated (a file given by name that
	// is one).
	Configs []*CRIConfig
	// Errors make what they are about unused: a pod with an error is not
	// probed (it fails closed), a config's annotations are refused.
	Errors []*Error
	// Warnings are about what is used but partly inert (a probe naming a
	// port its container does not declare errors at every run, as under
	// kubelet): every container's Warnings, and the configs'.
	Warnings []*Error
	// Skipped are the files and documents not read, and why.
	Skipped []*Notice
}

// OK reports whether there is neither an error nor a warning: what
// cri-prober validate exits 0 for. Skipped files do not count.
func (r *Result) OK() bool { return len(r.Errors) == 0 && len(r.Warnings) == 0 }

// collectWarnings gathers the pods' and containers' warnings.
func (r *Result) collectWarnings() {
	for _, p := range r.Pods {
		r.Warnings = append(r.Warnings, p.Warnings...)
		for _, c := range p.Containers {
			r.Warnings = append(r.Warnings, c.Warnings...)
		}
	}
	for _, c := range r.Configs {
		if c.Spec != nil {
			r.Warnings = append(r.Warnings, c.Spec.Warnings...)
		}
	}
}
