package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/cri-prober/cri-prober/pkg/spec"
)

func newValidateCommand() *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "validate (-f FILE | FILE | DIR)...",
		Short: "Check Pod manifests as the agent reads them, with file and line",
		Long: `Checks Pod manifests as the agent reads them: strict decoding (unknown and
duplicate fields are errors), the API server's defaults and validation
rules (kubelet 1.36's), and what cri-prober cannot honour. Prints every
problem with its file and line, pod, container and field, and every
warning: a probe naming a port its container does not declare is accepted
(as kubelet accepts it) but errors at every run and never changes its
result. Directories are read as --pod-manifests reads them (*.yaml, *.yml,
*.json).

Exit codes: 0 all is well, 1 a problem or warning was found, 2 bad
arguments.`,
		Example: `  cri-prober validate pod.yaml
  cri-prober validate -f pod.yaml -f other.yaml
  cri-prober validate /etc/cri-prober/pods
  cri-prober validate examples/demo && cri-prober run --pod-manifests examples/demo`,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths := append(files, args...)
			if len(paths) == 0 {
				return usageErrorf(cmd, "validate needs at least one file or directory")
			}
			return validate(paths, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "a manifest `file` or directory (repeatable; or give them as arguments)")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	return cmd
}

func validate(paths []string, stdout io.Writer) error {
	var pods, problems, warnings int
	for _, path := range paths {
		fi, err := os.Stat(path)
		if err != nil {
			safef(stdout, "%s: %v\n", path, err)
			problems++
			continue
		}
		var found []*spec.Pod
		var errs []*spec.Error
		if fi.IsDir() {
			found, errs = spec.LoadDir(path)
		} else {
			found, errs = spec.LoadFile(path)
		}
		pods += len(found)
		for _, e := range errs {
			safeln(stdout, e.Error())
		}
		problems += len(errs)
		for _, p := range found {
			for _, c := range p.Containers {
				for _, w := range c.Warnings {
					safef(stdout, "warning: %s\n", w.Error())
					warnings++
				}
			}
		}
	}
	if problems > 0 || warnings > 0 {
		safef(stdout, "%d problem(s), %d warning(s); %d valid pod(s)\n", problems, warnings, pods)
		return errProblemsFound
	}
	safef(stdout, "ok: %d valid pod(s)\n", pods)
	return nil
}
