package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/cri-prober/cri-prober/pkg/manifests"
	"github.com/cri-prober/cri-prober/pkg/spec"
)

func newValidateCommand() *cobra.Command {
	var files []string
	var static bool
	var output string
	cmd := &cobra.Command{
		Use:   "validate (-f FILE | FILE | DIR)...",
		Short: "Check Pod manifests as the agent reads them, with file and line",
		Long: `Checks Pod manifests as the agent reads them: strict decoding (unknown and
duplicate fields are errors), the API server's defaults and validation
rules (kubelet 1.36's), and what cri-prober cannot honour. Prints every
problem with its file and line, pod, container and field, and every
warning: a probe naming a port its container does not declare is accepted
(as kubelet accepts it) but errors at every run and never changes its
result. Duplicate keys are errors (as kubectl --validate=strict), not the
last value silently winning. Directories are read as --pod-manifests reads
them (*.yaml, *.yml, *.json); what is not a Pod manifest there (a README, a
Service, a crictl config) is skipped with a note. A crictl container or
pod-sandbox config (the JSON crictl create and runp take) named on its own
is checked as the agent reads its cri-prober.io/ annotations, offline.
With --static, manifests are checked as the pods the agent makes
(run --static-pod-path, play): also what a static pod may not reference
(secrets, config maps, service accounts, claims), the volumes the agent
cannot set up, images, volume mounts, ports and DNS.

-o json or -o yaml prints the same as data, for CI: each file with its
pods and CRI configs, each problem (file, line, namespace, pod, container,
field, message, severity: error or warning) and what was skipped
(docs/api.md has the fields); the exit code is the same.

Exit codes: 0 all is well, 1 a problem or warning was found, 2 bad
arguments.`,
		Example: `  cri-prober validate pod.yaml
  cri-prober validate -f pod.yaml -f other.yaml
  cri-prober validate /etc/cri-prober/pods
  cri-prober validate container-config.json pod-config.json
  kustomize build . | cri-prober validate -f -
  cri-prober validate --static examples/demo && cri-prober run --static-pod-path examples/demo
  cri-prober validate -o json /etc/cri-prober/pods | jq -r '.files[].problems[] | "\(.file):\(.line) \(.field)"'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths := append(files, args...)
			if len(paths) == 0 {
				return usageErrorf(cmd, "validate needs at least one file or directory")
			}
			if err := checkOutput(cmd, output, outputTable, outputJSON, outputYAML); err != nil {
				return err
			}
			var opts []manifests.LoadOption
			if static {
				opts = append(opts, manifests.AsStatic(spec.Static{NodeName: "node"}))
			}
			if structured(output) {
				return validateData(paths, cmd.InOrStdin(), cmd.OutOrStdout(), output, opts...)
			}
			return validate(paths, cmd.InOrStdin(), cmd.OutOrStdout(), opts...)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "a manifest `file` or directory, - for standard input (repeatable; or give them as arguments)")
	cmd.Flags().BoolVar(&static, "static", false, "check the manifests as pods the agent makes (run --static-pod-path, play): what a static pod may not reference, images, volumes, mounts")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	addOutputFlag(cmd, &output, outputTable, outputJSON, outputYAML)
	return cmd
}

func validate(paths []string, stdin io.Reader, stdout io.Writer, opts ...manifests.LoadOption) error {
	var pods, configs, problems, warnings int
	for _, path := range paths {
		r := loadPath(path, stdin, opts...)
		pods += len(r.Pods)
		configs += len(r.Configs)
		for _, n := range r.Skipped {
			safeln(stdout, n.String())
		}
		for _, e := range r.Errors {
			safeln(stdout, e.Error())
		}
		for _, w := range r.Warnings {
			safef(stdout, "warning: %s\n", w.Error())
		}
		problems += len(r.Errors)
		warnings += len(r.Warnings)
	}
	valid := fmt.Sprintf("%d valid pod(s)", pods)
	if configs > 0 {
		valid += fmt.Sprintf(", %d valid CRI config(s)", configs)
	}
	if problems > 0 || warnings > 0 {
		safef(stdout, "%d problem(s), %d warning(s); %s\n", problems, warnings, valid)
		return errProblemsFound
	}
	safef(stdout, "ok: %s\n", valid)
	return nil
}

// loadPath loads a file or directory, or standard input for "-", as
// kubectl reads -f -.
func loadPath(path string, stdin io.Reader, opts ...manifests.LoadOption) *spec.Result {
	if path != "-" {
		return manifests.Load(path, opts...)
	}
	data, err := io.ReadAll(io.LimitReader(stdin, manifests.MaxFileSize+1))
	if err != nil {
		return &spec.Result{Errors: []*spec.Error{{Source: "<stdin>", Detail: "cannot read it: " + err.Error()}}}
	}
	return manifests.LoadData("<stdin>", data, opts...)
}

// validateReport is what validate -o json|yaml prints: the field names are
// an API (docs/api.md), kept stable; lists are never null.
type validateReport struct {
	Files    []validatedFile `json:"files"`
	Pods     int             `json:"pods"`    // valid pods, every file's
	Configs  int             `json:"configs"` // valid CRI configs
	Errors   int             `json:"errors"`
	Warnings int             `json:"warnings"`
}

// validatedFile is one file (or directory, or <stdin>) and what it gave.
type validatedFile struct {
	File     string            `json:"file"`
	Pods     []validatedPod    `json:"pods"`
	Configs  []validatedConfig `json:"configs"`
	Problems []validateProblem `json:"problems"`
	Skipped  []validateSkipped `json:"skipped"`
}

type validatedPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Line      int    `json:"line,omitempty"`
}

type validatedConfig struct {
	Kind      string `json:"kind"` // container config or pod sandbox config
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Container string `json:"container,omitempty"`
}

// validateProblem is one spec.Error; severity is error (what it is about
// is not used: the pod is not probed) or warning (used, partly inert).
type validateProblem struct {
	File      string `json:"file"`
	Line      int    `json:"line,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Container string `json:"container,omitempty"`
	Field     string `json:"field,omitempty"`
	Message   string `json:"message"`
	Severity  string `json:"severity"`
}

type validateSkipped struct {
	Line   int    `json:"line,omitempty"`
	Reason string `json:"reason"`
}

const (
	severityError   = "error"
	severityWarning = "warning"
)

// validateData prints the report of paths as data, with validate's exit
// code.
func validateData(paths []string, stdin io.Reader, stdout io.Writer, format string, opts ...manifests.LoadOption) error {
	var loaded []*spec.Result
	for _, path := range paths {
		loaded = append(loaded, loadPath(path, stdin, opts...))
	}
	r := newValidateReport(loaded)
	if err := printObject(stdout, format, r); err != nil {
		return err
	}
	if r.Errors > 0 || r.Warnings > 0 {
		return errProblemsFound
	}
	return nil
}

// newValidateReport groups what each path gave by file: files in the order
// of the paths, and by name within one (a directory's); in a file, pods,
// problems and skipped documents by line.
func newValidateReport(loaded []*spec.Result) validateReport {
	report := validateReport{Files: []validatedFile{}}
	for _, r := range loaded {
		byName := map[string]*validatedFile{}
		file := func(source string) (*validatedFile, int) {
			name, line := spec.SplitSource(source)
			f, ok := byName[name]
			if !ok {
				f = &validatedFile{File: name, Pods: []validatedPod{}, Configs: []validatedConfig{}, Problems: []validateProblem{}, Skipped: []validateSkipped{}}
				byName[name] = f
			}
			return f, line
		}
		for _, p := range r.Pods {
			f, line := file(p.Source)
			f.Pods = append(f.Pods, validatedPod{Namespace: p.Namespace, Name: p.Name, Line: line})
		}
		for _, c := range r.Configs {
			f, _ := file(c.Source)
			f.Configs = append(f.Configs, validatedConfig{Kind: string(c.Kind), Namespace: c.Namespace, Pod: c.Pod, Container: c.Container})
		}
		problem := func(e *spec.Error, severity string) {
			f, line := file(e.Source)
			f.Problems = append(f.Problems, validateProblem{File: f.File, Line: line, Namespace: e.Namespace, Pod: e.Pod, Container: e.Container,
				Field: e.Field, Message: e.Detail, Severity: severity})
		}
		for _, e := range r.Errors {
			problem(e, severityError)
		}
		for _, w := range r.Warnings {
			problem(w, severityWarning)
		}
		for _, n := range r.Skipped {
			f, line := file(n.Source)
			f.Skipped = append(f.Skipped, validateSkipped{Line: line, Reason: n.Detail})
		}
		report.Pods += len(r.Pods)
		report.Configs += len(r.Configs)
		report.Errors += len(r.Errors)
		report.Warnings += len(r.Warnings)

		var files []validatedFile
		for _, f := range byName {
			slices.SortStableFunc(f.Pods, func(a, b validatedPod) int { return cmp.Compare(a.Line, b.Line) })
			slices.SortStableFunc(f.Problems, func(a, b validateProblem) int { return cmp.Compare(a.Line, b.Line) })
			slices.SortStableFunc(f.Skipped, func(a, b validateSkipped) int { return cmp.Compare(a.Line, b.Line) })
			files = append(files, *f)
		}
		slices.SortFunc(files, func(a, b validatedFile) int { return cmp.Compare(a.File, b.File) })
		report.Files = append(report.Files, files...)
	}
	return report
}
