package main

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/cri-prober/cri-prober/pkg/spec"
)

const validateHelp = `Usage: cri-prober validate FILE|DIR...

Checks Pod manifests as the agent reads them: strict decoding (unknown and
duplicate fields are errors), the API server's defaults and validation
rules (kubelet 1.36's), and what cri-prober cannot honour. Prints every
problem with its file and line, pod, container and field, and every
warning: a probe naming a port its container does not declare is accepted
(as kubelet accepts it) but errors at every run and never changes its
result. Exits 1 if there is any problem or warning, 0 if all is well.
Directories are read as --pod-manifests reads them (*.yaml, *.yml, *.json).

Examples:
  cri-prober validate pod.yaml
  cri-prober validate /etc/cri-prober/pods
  cri-prober validate examples/demo && cri-prober run --pod-manifests examples/demo

Flags:
`

// errProblemsFound makes the exit code 1 after the problems were printed.
var errProblemsFound = errors.New("problems found")

func runValidate(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("validate", validateHelp)
	fs.SetOutput(stderr)
	if err := parseFlagsWithArgs(fs, args, stdout, stderr); err != nil {
		return err // flag.ErrHelp: run exits 0
	}
	if fs.NArg() == 0 {
		safeln(stderr, "validate needs at least one file or directory")
		fs.Usage()
		return errUsage
	}
	var pods, problems, warnings int
	for _, path := range fs.Args() {
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
