// Command cri-prober gives containers run by a CRI runtime (containerd) the
// Kubernetes liveness, readiness and startup probe behaviour without kubelet.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/cri"
)

// version and commit are set at build time (-ldflags "-X main.version=…
// -X main.commit=…"); a plain go build records the commit itself when it
// can (vcs.revision).
var (
	version = "dev"
	commit  = ""
)

const usage = `cri-prober: Kubernetes probe behaviour for containers run by containerd, without kubelet.

Usage:
  cri-prober <command> [flags]

Commands:
  run       run the agent: probe containers with kubelet's semantics, restart them
  status    print a running agent's pods, readiness, restarts and last probe results
  events    print (or follow with -f) a running agent's events
  history   print a pod's recent probe runs and its last failures, with threshold counts
  why       say why the agent restarted a pod's containers (the failures, the exit, the back-off)
  wait      wait until a pod is ready, started or healthy (for CI scripts)
  probe     run one probe now (the container's own, or given inline) and print the result
  validate  check Pod manifests as the agent reads them, with file and line
  explain   when each probe of a manifest runs, detects and restarts; common mistakes
  pods      list the pods and containers the runtime reports (the poller's view)
  version   print the version

Run 'cri-prober help <command>' (or 'cri-prober <command> --help') for a command's flags and examples.
`

// exitCode carries the exit code an error should end the program with.
type exitCode struct {
	code int
	err  error
}

func (e exitCode) Error() string { return e.err.Error() }
func (e exitCode) Unwrap() error { return e.err }
func (e exitCode) Code() int     { return e.code }

// withCode makes err end the program with code (nil stays nil).
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return exitCode{code: code, err: err}
}

// errUsage marks command-line mistakes (exit code 2); the message has been
// printed already.
var errUsage = errors.New("usage error")

func main() {
	setVerbosity(0) // commands that talk to the runtime set their -v
	ctx, stop := signalContext()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	klog.Flush()
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		os.Exit(2)
	case errors.Is(err, errProblemsFound):
		os.Exit(1) // already reported
	case errors.Is(err, errProbeError):
		os.Exit(2) // already reported
	default:
		var coded exitCode
		fmt.Fprintln(os.Stderr, "cri-prober:", err)
		if errors.As(err, &coded) {
			os.Exit(coded.code)
		}
		os.Exit(1)
	}
}

// interrupted is the cause of a context a signal cancelled: a command
// that gives up because of it exits as a shell reports the signal.
type interrupted struct{ sig syscall.Signal }

func (i interrupted) Error() string { return "interrupted by " + i.sig.String() }

// exitCode is 128 + the signal's number, as a shell reports it.
func (i interrupted) exitCode() int { return 128 + int(i.sig) }

// signalContext is cancelled by the first SIGINT or SIGTERM, which starts
// an orderly shutdown; a second one exits at once (128 + the signal's
// number, as a shell reports it), as kubectl and containerd do, so that an
// operator is never stuck behind a shutdown that hangs.
func signalContext() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case sig := <-signals:
			cancel(interrupted{sig.(syscall.Signal)})
		case <-done:
			return
		}
		select {
		case sig := <-signals:
			fmt.Fprintf(os.Stderr, "cri-prober: second %v while shutting down; exiting now\n", sig)
			klog.Flush()
			os.Exit(128 + int(sig.(syscall.Signal)))
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(signals)
		close(done)
		<-finished
		cancel(nil)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if err := runCommand(ctx, args, stdout, stderr); !errors.Is(err, flag.ErrHelp) {
		return err
	}
	return nil // the command printed its help, as asked
}

// newFlagSet is a command's flag set; its usage is help, then the flags.
func newFlagSet(name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help)
		fs.PrintDefaults()
	}
	return fs
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "run":
		return runAgent(ctx, args[1:], stdout, stderr)
	case "pods":
		return runPods(ctx, args[1:], stdout, stderr)
	case "wait":
		return runWait(ctx, args[1:], stdout, stderr)
	case "probe":
		return runProbe(ctx, args[1:], stdout, stderr)
	case "explain":
		return runExplain(ctx, args[1:], stdout, stderr)
	case "validate":
		return runValidate(ctx, args[1:], stdout, stderr)
	case "status":
		return runStatus(ctx, args[1:], stdout, stderr)
	case "events":
		return runEvents(ctx, args[1:], stdout, stderr)
	case "history":
		return runHistory(ctx, args[1:], stdout, stderr)
	case "why":
		return runWhy(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionString())
		fmt.Fprint(stdout, versionDetails())
		return nil
	case "help", "--help", "-help", "-h":
		if len(args) > 1 && args[0] == "help" && args[1] != "help" {
			// `help CMD` is `CMD --help`, as kubectl and crictl have it.
			return run(ctx, []string{args[1], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
		return errUsage
	}
}

func versionString() string {
	v := version
	if rev := revision(); rev != "" {
		v += " (" + rev + ")"
	}
	return "cri-prober " + v
}

// versionDetails is what `version` prints below versionString: what the
// binary was built with, as kubectl version and crictl version say theirs.
func versionDetails() string {
	return fmt.Sprintf("  go: %s %s/%s\n  kubernetes api: %s (k8s.io/api), cri-api %s\n  probe semantics: kubelet v1.36\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, moduleVersion("k8s.io/api"), moduleVersion("k8s.io/cri-api"))
}

// revision is the commit the binary was built from (12 hex digits), if
// the build recorded it.
func revision() string {
	if commit != "" {
		return commit
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return s.Value[:12]
			}
		}
	}
	return ""
}

// moduleVersion is the version of a module the binary was built with.
func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}

// runtimeFlags are the flags of every command that talks to the runtime.
type runtimeFlags struct {
	endpoint       string
	connectTimeout time.Duration
	requestTimeout time.Duration
	maxExecReply   int
	verbosity      int
}

func (f *runtimeFlags) register(fs *flag.FlagSet) { f.registerAs(fs, "timeout") }

// registerAs registers the flags with the connect timeout under another
// name, for commands whose --timeout means something else.
func (f *runtimeFlags) registerAs(fs *flag.FlagSet, connectTimeout string) {
	fs.StringVar(&f.endpoint, "runtime-endpoint", "", "CRI endpoint (default $"+cri.EndpointEnv+", else "+cri.DefaultEndpoint+")")
	fs.DurationVar(&f.connectTimeout, connectTimeout, 5*time.Second, "timeout for connecting to the runtime")
	fs.DurationVar(&f.requestTimeout, "runtime-request-timeout", 30*time.Second, "deadline of each CRI call (an exec probe waits for the runtime's answer up to its timeout plus 2m, as kubelet)")
	fs.IntVar(&f.maxExecReply, "max-exec-reply-bytes", cri.DefaultMaxExecReply, "largest exec reply (a probe command's output) read from the runtime; a longer one makes the probe an error, not a failure (kubelet: 16777216; only 10KiB of output is kept either way)")
	fs.IntVar(&f.verbosity, "v", 0, "log verbosity (klog levels: 2 adds retries, 4 every runtime event)")
}

// resolvedEndpoint applies crictl's precedence: flag, then environment,
// then containerd's default socket.
func (f *runtimeFlags) resolvedEndpoint() string {
	if f.endpoint != "" {
		return f.endpoint
	}
	if env := os.Getenv(cri.EndpointEnv); env != "" {
		return env
	}
	return cri.DefaultEndpoint
}

func (f *runtimeFlags) dial(ctx context.Context) (*cri.Client, error) {
	return cri.Dial(ctx, f.resolvedEndpoint(), f.dialOptions()...)
}

func (f *runtimeFlags) dialOptions() []cri.Option {
	setVerbosity(f.verbosity)
	return []cri.Option{cri.WithConnectTimeout(f.connectTimeout), cri.WithCallTimeout(f.requestTimeout), cri.WithMaxExecReply(f.maxExecReply)}
}

// parseFlagsWithArgs parses args, leaving positional arguments in fs.Args.
func parseFlagsWithArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stdout)
			fs.Usage()
			return flag.ErrHelp
		}
	}
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flag.ErrHelp
		}
		return errUsage
	}
	return nil
}

// parseFlags parses args and rejects stray arguments. Help goes to stdout
// (flag.ErrHelp, exit 0); mistakes go to stderr with the usage (exit 2).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	if err := parseFlagsWithArgs(fs, args, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		fs.Usage()
		return errUsage
	}
	return nil
}
