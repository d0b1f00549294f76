// Command cri-prober gives containers run by a CRI runtime (containerd) the
// Kubernetes liveness, readiness and startup probe behaviour without kubelet.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
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

// errUsage marks command-line mistakes (exit code 2): every usageError is
// one.
var errUsage = errors.New("usage error")

func main() {
	setVerbosity(0, "text") // commands that talk to the runtime set their -v and --log-format
	ctx, stop := signalContext()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	klog.Flush()
	os.Exit(report(err, os.Stderr))
}

// report prints what err says that was not printed yet and returns the
// exit code: 0 success, 1 problems found (or a failure), 2 usage errors
// and errors (kubectl's and crictl's convention), or the code err carries.
func report(err error, stderr io.Writer) int {
	var usage usageError
	var coded exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		fmt.Fprintln(stderr, "error:", err)
		return 2
	case errors.Is(err, errProblemsFound):
		return 1 // already reported
	case errors.Is(err, errProbeError):
		return 2 // already reported
	case errors.As(err, &coded):
		fmt.Fprintln(stderr, "cri-prober:", printableLines(err.Error()))
		return coded.code
	default:
		fmt.Fprintln(stderr, "cri-prober:", printableLines(err.Error()))
		return 1
	}
}

// printableLines is an error's text as it is printed: its lines and tabs
// kept, the rest made printable (an error may carry what a workload or a
// server sent).
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		cells := strings.Split(l, "\t")
		for j, c := range cells {
			cells[j] = terminalSafe(c)
		}
		lines[i] = strings.Join(cells, "\t")
	}
	return strings.Join(lines, "\n")
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

// runtimeFlags are the flags of every command that talks to the runtime,
// named and found as crictl's.
type runtimeFlags struct {
	endpoint       string
	crictlConfig   string
	connectTimeout time.Duration
	requestTimeout time.Duration
	maxExecReply   int
	verbosity      int
	logFormat      string

	flags              *pflag.FlagSet
	connectTimeoutName string
}

func (f *runtimeFlags) register(fs *pflag.FlagSet) { f.registerAs(fs, "timeout") }

// registerAs registers the flags with the connect timeout under another
// name, for commands whose --timeout means something else.
func (f *runtimeFlags) registerAs(fs *pflag.FlagSet, connectTimeout string) {
	f.flags, f.connectTimeoutName = fs, connectTimeout
	fs.StringVarP(&f.endpoint, "runtime-endpoint", "r", "", "CRI endpoint (default: $"+cri.EndpointEnv+", else runtime-endpoint in crictl's config file, else "+cri.DefaultEndpoint+")")
	fs.StringVar(&f.crictlConfig, "crictl-config", "", "crictl's config `file`, for its runtime-endpoint and timeout (default: $"+cri.ConfigFileEnv+", else "+cri.DefaultConfigFile+" if it exists)")
	if connectTimeout == "timeout" {
		fs.DurationVarP(&f.connectTimeout, connectTimeout, "t", 5*time.Second, "timeout for connecting to the runtime (default: crictl config's timeout, else 5s)")
	} else {
		fs.DurationVar(&f.connectTimeout, connectTimeout, 5*time.Second, "timeout for connecting to the runtime (default: crictl config's timeout, else 5s)")
	}
	fs.DurationVar(&f.requestTimeout, "runtime-request-timeout", 30*time.Second, "deadline of each CRI call (an exec probe waits for the runtime's answer up to its timeout plus 2m, as kubelet)")
	fs.IntVar(&f.maxExecReply, "max-exec-reply-bytes", cri.DefaultMaxExecReply, "largest exec reply (a probe command's output) read from the runtime; a longer one makes the probe an error, not a failure (kubelet: 16777216; only 10KiB of output is kept either way)")
	fs.IntVarP(&f.verbosity, "v", "v", 0, "log verbosity (klog levels: 2 adds retries, 4 every runtime event)")
	f.logFormat = "text"
	fs.Var(logFormatValue{&f.logFormat}, "log-format", "log format: text (klog's, one record per line) or json (one JSON object per line)")
}

// logFormatValue is --log-format, checked as it is parsed.
type logFormatValue struct{ p *string }

func (v logFormatValue) String() string { return *v.p }
func (logFormatValue) Type() string     { return "format" }
func (v logFormatValue) Set(s string) error {
	if err := checkLogFormat(s); err != nil {
		return err
	}
	*v.p = s
	return nil
}

// resolvedEndpoint applies crictl's precedence (cri.ResolveEndpoint); a
// timeout in crictl's config file applies unless the flag is given.
func (f *runtimeFlags) resolvedEndpoint() (cri.Endpoint, error) {
	e, err := cri.ResolveEndpoint(f.endpoint, f.crictlConfig)
	if err != nil {
		return e, err
	}
	if e.Timeout > 0 && (f.flags == nil || !f.flags.Changed(f.connectTimeoutName)) {
		f.connectTimeout = e.Timeout
	}
	return e, nil
}

func (f *runtimeFlags) dial(ctx context.Context, extra ...cri.Option) (*cri.Client, error) {
	e, err := f.resolvedEndpoint()
	if err != nil {
		return nil, err
	}
	client, err := cri.Dial(ctx, e.Address, append(f.dialOptions(), extra...)...)
	if err != nil && e.Source != cri.FromFlag {
		return nil, fmt.Errorf("%w (endpoint from %s)", err, describeSource(e))
	}
	return client, err
}

// describeSource names the setting an endpoint came from.
func describeSource(e cri.Endpoint) string {
	if e.Source == cri.FromConfigFile {
		return e.ConfigFile
	}
	return string(e.Source)
}

func (f *runtimeFlags) dialOptions() []cri.Option {
	setVerbosity(f.verbosity, f.logFormat)
	return []cri.Option{cri.WithConnectTimeout(f.connectTimeout), cri.WithCallTimeout(f.requestTimeout), cri.WithMaxExecReply(f.maxExecReply)}
}
