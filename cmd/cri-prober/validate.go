package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/cri-prober/cri-prober/pkg/spec"
)

func newValidateCommand() *cobra.Command {
	var files []string
	var static bool
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

Exit codes: 0 all is well, 1 a problem or warning was found, 2 bad
arguments.`,
		Example: `  cri-prober validate pod.yaml
  cri-prober validate -f pod.yaml -f other.yaml
  cri-prober validate /etc/cri-prober/pods
  cri-prober validate container-config.json pod-config.json
  kustomize build . | cri-prober validate -f -
  cri-prober validate --static examples/demo && cri-prober run --static-pod-path examples/demo`,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths := append(files, args...)
			if len(paths) == 0 {
				return usageErrorf(cmd, "validate needs at least one file or directory")
			}
			var opts []spec.LoadOption
			if static {
				opts = append(opts, spec.AsStatic(spec.Static{NodeName: "node"}))
			}
			return validate(paths, cmd.InOrStdin(), cmd.OutOrStdout(), opts...)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "a manifest `file` or directory, - for standard input (repeatable; or give them as arguments)")
	cmd.Flags().BoolVar(&static, "static", false, "check the manifests as pods the agent makes (run --static-pod-path, play): what a static pod may not reference, images, volumes, mounts")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	return cmd
}

func validate(paths []string, stdin io.Reader, stdout io.Writer, opts ...spec.LoadOption) error {
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
func loadPath(path string, stdin io.Reader, opts ...spec.LoadOption) *spec.Result {
	if path != "-" {
		return spec.Load(path, opts...)
	}
	data, err := io.ReadAll(io.LimitReader(stdin, spec.MaxManifestSize+1))
	if err != nil {
		return &spec.Result{Errors: []*spec.Error{{Source: "<stdin>", Detail: "cannot read it: " + err.Error()}}}
	}
	return spec.LoadData("<stdin>", data, opts...)
}
