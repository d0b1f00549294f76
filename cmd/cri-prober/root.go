package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const rootLong = `cri-prober: Kubernetes probe behaviour for containers run by containerd, without kubelet.

It runs liveness, readiness and startup probes with kubelet's semantics
against containers it finds through the CRI API, restarts failed ones as
kubelet would, and shows what it saw and did: on a command line shaped like
kubectl's and crictl's, on a state API and status page, and as Prometheus
metrics.`

// newRootCommand is the command tree. Every command prints to
// cmd.OutOrStdout and cmd.ErrOrStderr, so tests run it in process.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "cri-prober",
		Short: "Kubernetes probe behaviour for containers run by containerd, without kubelet",
		Long:  rootLong,
		Example: `  cri-prober play pod.yaml                          # make its pods, run them as kubelet would, follow them
  cri-prober pods                                   # what the runtime has
  cri-prober run --pod-manifests /etc/cri-prober/pods
  cri-prober status -A                              # what a running agent sees
  cri-prober wait ci/web --for ready --timeout 60s  # for CI scripts
  cri-prober probe --address 127.0.0.1:8080 --http-get /healthz --debug`,
		// main prints errors its own way (usage errors with a pointer to
		// --help, as kubectl does); cobra stays quiet.
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          unknownCommand,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
		Version:                    version,
		SuggestionsMinimumDistance: 2,
	}
	root.SetVersionTemplate(versionString() + "\n" + versionDetails())
	// --version without cobra's -v, which is klog's verbosity everywhere
	// else (kubectl's -v).
	root.Flags().Bool("version", false, "print the version (as the version command)")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{cmd: cmd, err: err}
	})
	root.AddGroup(
		&cobra.Group{ID: "agent", Title: "Running pods and the agent:"},
		&cobra.Group{ID: "read", Title: "Asking a running agent:"},
		&cobra.Group{ID: "change", Title: "Changing a running agent:"},
		&cobra.Group{ID: "direct", Title: "Without an agent:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add("agent", newRunCommand(new(runOptions)), newPlayCommand())
	add("read", newStatusCommand(), newEventsCommand(), newHistoryCommand(), newWhyCommand())
	add("change", newPauseCommand(), newResumeCommand(), newGateCommand())
	add("direct", newWaitCommand(), newProbeCommand(), newValidateCommand(), newExplainCommand(), newPodsCommand(), newLogsCommand())
	root.AddCommand(newVersionCommand(), newGenDocsCommand(root))
	root.SetHelpCommandGroupID("")
	root.SetCompletionCommandGroupID("")
	return root
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

// usageError is a command-line mistake (exit code 2): main prints it with
// a pointer to the command's help, as kubectl does.
type usageError struct {
	cmd *cobra.Command
	err error
}

func (e usageError) Error() string {
	return fmt.Sprintf("%v\nSee '%s --help' for usage.", e.err, e.cmd.CommandPath())
}

func (e usageError) Is(target error) bool { return target == errUsage }
func (e usageError) Unwrap() error        { return e.err }

// usageErrorf is a usageError of cmd with a message.
func usageErrorf(cmd *cobra.Command, format string, args ...any) error {
	return usageError{cmd: cmd, err: fmt.Errorf(format, args...)}
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf(cmd, "unexpected argument(s): %s", strings.Join(args, " "))
	}
	return nil
}

// unknownCommand is the root's answer to a word that is no command, with
// cobra's suggestions (kubectl's "Did you mean this?").
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if suggestions := cmd.SuggestionsFor(args[0]); len(suggestions) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(suggestions, "\n\t")
	}
	return usageErrorf(cmd, "%s", msg)
}

// rangeArgs accepts between min and max positional arguments.
func rangeArgs(min, max int, want string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return usageErrorf(cmd, "want %s, got %d argument(s)", want, len(args))
		}
		return nil
	}
}

// serverFlagUsage is --server's help on every command that asks an agent.
const serverFlagUsage = "the agent's state API: its --listen address as host:port (or :port), http://host:port, https://[user:password@]host:port, or unix:///path (default: unix://" + agentSocket + ", the systemd socket unit's, when it exists, else " + agentLoopbackPort + "); an agent on this host must run as root or as you, or its answers are refused"

// addServerFlag registers -s/--server, kubectl's name for the API address.
func addServerFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVarP(p, "server", "s", defaultServer, serverFlagUsage)
}

// namespaceFilter is -n/-A of the commands that list: one namespace, or
// every one (the default, the node's view, as crictl lists).
type namespaceFilter struct {
	namespace string
	all       bool
}

func (f *namespaceFilter) register(cmd *cobra.Command, what string) {
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", "only "+what+" of this namespace")
	cmd.Flags().BoolVarP(&f.all, "all-namespaces", "A", false, what+" of every namespace (the default; kubectl's -A)")
	cmd.MarkFlagsMutuallyExclusive("namespace", "all-namespaces")
}

func (f namespaceFilter) matches(namespace string) bool {
	return f.namespace == "" || f.namespace == namespace
}

// podRef is how every command names a pod: NAMESPACE/NAME, or NAME with
// -n NAMESPACE (default "default"), as kubectl names objects.
type podRef struct {
	namespace string
}

func (r *podRef) register(fs *pflag.FlagSet) {
	fs.StringVarP(&r.namespace, "namespace", "n", "", "the pod's namespace, when the pod is given as NAME (default \"default\")")
}

// parse reads a pod argument: NAMESPACE/NAME, or NAME in -n's namespace.
func (r *podRef) parse(cmd *cobra.Command, arg string) (namespace, name string, err error) {
	ns, n, qualified := strings.Cut(arg, "/")
	switch {
	case !qualified:
		ns, n = r.namespace, arg
		if ns == "" {
			ns = "default"
		}
	case r.namespace != "" && r.namespace != ns:
		return "", "", usageErrorf(cmd, "pod %q is in namespace %q but -n says %q: give one of them", arg, ns, r.namespace)
	}
	if ns == "" || n == "" || strings.Contains(n, "/") {
		return "", "", usageErrorf(cmd, "pod %q: want NAMESPACE/NAME, or NAME with -n NAMESPACE", arg)
	}
	return ns, n, nil
}

// registerPodAndContainer registers --pod (the pod may also be the
// argument), -c/--container by name, as kubectl's, and --container-name,
// its old name.
func registerPodAndContainer(fs *pflag.FlagSet, pod, container *string, containerUsage string) {
	fs.StringVar(pod, "pod", "", "the pod as `NAMESPACE/NAME` (or give it as the argument)")
	fs.StringVarP(container, "container", "c", "", containerUsage)
	fs.StringVar(container, "container-name", "", "the same as --container")
	_ = fs.MarkDeprecated("container-name", "use -c/--container")
}

// answerOrTwo is the exit code rule of wait and probe, whose 1 means "no":
// their answers (0, 1), usage errors (2) and signals keep their codes;
// every other error (the runtime unreachable, …) exits 2.
func answerOrTwo(err error) error {
	var coded exitCode
	if err == nil || errors.Is(err, errUsage) || errors.Is(err, errProblemsFound) || errors.Is(err, errProbeError) || errors.As(err, &coded) {
		return err
	}
	return withCode(2, err)
}

// errProblemsFound makes the exit code 1 after the problems were printed.
var errProblemsFound = errors.New("problems found")
