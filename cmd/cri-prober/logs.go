package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-prober/cri-prober/pkg/bounded"
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/logs"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// defaultContainerAnnotation names the container kubectl picks when none
// is given (kubelet copies a pod's annotations to its sandbox's config).
const defaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

func newLogsCommand() *cobra.Command {
	var o logsOptions
	cmd := &cobra.Command{
		Use:   "logs POD [CONTAINER]",
		Short: "Print a container's log, as kubectl logs (-f follows it, -p the instance before a restart)",
		Long: `Prints the log of a container of a pod as kubectl logs prints it: the
current instance's (with -p, the previous one's), stdout and stderr in the
order they were written, from the file the runtime writes (kubelet's
/var/log/pods/NAMESPACE_NAME_UID/CONTAINER/ATTEMPT.log). It asks the runtime
over CRI which container and which file, as crictl logs does, so it needs no
agent and reads pods made by kubelet, crictl or anything else, provided the
container was created with a log path.

POD is NAMESPACE/NAME, or NAME with -n NAMESPACE. The container is -c (or
the second argument); without one, the pod's only container, or the one
its kubectl.kubernetes.io/default-container annotation names. A container
waiting to restart shows its last run's log, as under kubelet.

With -f it keeps printing until the container exits (or Ctrl-C), through
log rotation. --tail counts a line the runtime split into partial records
once, and shows it whole. Where --tail or --since asks for more lines than
the current file holds, the lines come from the container's rotated files
too (0.log.<timestamp>, gzipped or not: kubelet's rotation, which the agent
does for its containers), oldest first; kubectl logs and crictl logs read
the current file only. Without --tail or --since, the current file alone.

On a terminal, control characters the container wrote (escape sequences,
carriage returns, backspaces, bidirectional overrides) are shown escaped,
as \x1b, so that a log cannot drive the terminal; kubectl passes them
through. Into a pipe or a file the log goes unchanged, byte for byte
(| less -R shows its colours).`,
		Example: `  cri-prober logs shop/web
  cri-prober logs -n shop web -c app --tail 20 --timestamps
  cri-prober logs shop/web app -p                # the instance before the last restart
  cri-prober logs shop/web -f --since 10m
  cri-prober logs shop/web --all-containers --prefix -f`,
		Args: rangeArgs(1, 2, "POD [CONTAINER]"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	fs := cmd.Flags()
	o.runtimeFlags.register(fs)
	_ = fs.MarkHidden("max-exec-reply-bytes") // no exec here
	o.podRef.register(fs)
	fs.StringVarP(&o.container, "container", "c", "", "the container, by name (default: the pod's only one, or the one its "+defaultContainerAnnotation+" annotation names)")
	fs.BoolVar(&o.allContainers, "all-containers", false, "every container's log, in the order the containers were created (init containers first)")
	fs.BoolVarP(&o.follow, "follow", "f", false, "keep printing what the container writes until it exits")
	fs.BoolVarP(&o.previous, "previous", "p", false, "the previous instance's log: the newest that exited before the current one")
	fs.Int64Var(&o.tail, "tail", -1, "lines to print from the end of the log; -1: all")
	fs.DurationVar(&o.since, "since", 0, "only lines newer than this, like 5s, 2m or 3h (default: all)")
	fs.StringVar(&o.sinceTime, "since-time", "", "only lines written at or after this `time` (RFC 3339, like 2024-08-30T06:00:00Z)")
	fs.BoolVar(&o.timestamps, "timestamps", false, "start each line with the time the runtime read it (RFC 3339, in nanoseconds)")
	fs.Int64Var(&o.limitBytes, "limit-bytes", 0, "stop after this many bytes (default: no limit)")
	fs.BoolVar(&o.prefix, "prefix", false, "start each line with its source: [pod/NAME/CONTAINER]")
	fs.StringVar(&o.stream, "stream", "all", "the container's streams to print: all, stdout or stderr")
	_ = cmd.RegisterFlagCompletionFunc("stream", cobra.FixedCompletions([]string{"all", "stdout", "stderr"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

type logsOptions struct {
	runtimeFlags
	podRef
	container                                           string
	allContainers, follow, previous, timestamps, prefix bool
	tail, limitBytes                                    int64
	since                                               time.Duration
	sinceTime, stream                                   string
}

// readOptions checks the flags that say what to print, with kubectl's
// rules.
func (o *logsOptions) readOptions(cmd *cobra.Command, now time.Time) (logs.Options, error) {
	opts := logs.Options{Tail: o.tail, LimitBytes: o.limitBytes, Timestamps: o.timestamps, Follow: o.follow, Rotated: true}
	switch {
	case o.tail < -1:
		return opts, usageErrorf(cmd, "--tail %d: want a number of lines, or -1 for all", o.tail)
	case o.limitBytes < 0:
		return opts, usageErrorf(cmd, "--limit-bytes %d: want a number of bytes (0: no limit)", o.limitBytes)
	case o.since < 0:
		return opts, usageErrorf(cmd, "--since %v: want a positive duration", o.since)
	case o.since > 0 && o.sinceTime != "":
		return opts, usageErrorf(cmd, "--since and --since-time: give at most one")
	case o.since > 0:
		opts.Since = now.Add(-o.since)
	case o.sinceTime != "":
		t, err := time.Parse(time.RFC3339Nano, o.sinceTime) // RFC 3339, fractions of a second or not
		if err != nil {
			return opts, usageErrorf(cmd, "--since-time %q: want an RFC 3339 time, like 2024-08-30T06:00:00Z", o.sinceTime)
		}
		opts.Since = t
	}
	switch o.stream {
	case "all", "":
		opts.Stream = logs.AllStreams
	case "stdout":
		opts.Stream = logs.Stdout
	case "stderr":
		opts.Stream = logs.Stderr
	default:
		return opts, usageErrorf(cmd, "--stream %q: want all, stdout or stderr", o.stream)
	}
	return opts, nil
}

func (o *logsOptions) run(cmd *cobra.Command, args []string) error {
	ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	namespace, name, err := o.podRef.parse(cmd, args[0])
	if err != nil {
		return err
	}
	container := o.container
	if len(args) == 2 {
		if container != "" {
			return usageErrorf(cmd, "the container is given twice (argument and -c): give one")
		}
		container = args[1]
	}
	if o.allContainers && container != "" {
		return usageErrorf(cmd, "--all-containers and container %q: give one", container)
	}
	opts, err := o.readOptions(cmd, time.Now())
	if err != nil {
		return err
	}

	client, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	pod, err := findPod(ctx, client, namespace, name)
	if err != nil {
		return err
	}
	byName := instancesByName(pod)
	names, err := o.chooseContainers(cmd, pod, byName, container)
	if err != nil {
		return err
	}

	// One writer for everything, so that both streams keep their order
	// (kubectl's single stream); made safe first on a terminal.
	out := &lockedWriter{w: stdout}
	if isTerminal(stdout) {
		term := &terminalWriter{w: stdout}
		defer term.Flush()
		out.w = term
	}
	// With --all-containers, one container without a log hides none of
	// the others': its error is printed when met (a follow may go on for
	// long), and the exit code says one was missing.
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
		if o.allContainers {
			safef(stderr, "error: %v\n", err)
		}
	}
	var sources []logSource
	for _, c := range names {
		src, err := resolveSource(ctx, client, name, c, byName[c], o.previous)
		if err != nil {
			fail(err)
			continue
		}
		sources = append(sources, src)
	}
	o.print(ctx, client, sources, opts, out, name, fail)
	switch {
	case len(errs) == 0:
		return nil
	case o.allContainers:
		return errProblemsFound // printed
	}
	return safeError{errs[0]} // one container: its error is the command's
}

// print reads each source's log to out: one after the other, or, when
// following several, all at once, a line at a time. A source's error goes
// to fail.
func (o *logsOptions) print(ctx context.Context, client *cri.Client, sources []logSource, opts logs.Options, out *lockedWriter, pod string, fail func(error)) {
	together := o.follow && len(sources) > 1
	var wg sync.WaitGroup
	for _, src := range sources {
		w := &sourceWriter{out: out, held: together}
		if o.prefix {
			w.prefix = []byte(fmt.Sprintf("[pod/%s/%s] ", pod, src.container))
		}
		read := func() {
			if err := src.read(ctx, client, opts, w); err != nil {
				fail(err)
			}
		}
		if together {
			wg.Go(read)
		} else {
			read()
		}
	}
	wg.Wait()
}

// logSource is the instance of a container whose log is read.
type logSource struct {
	pod, container, id, path string
}

// read prints the log; following, until the instance no longer runs. An
// interrupted follow is no error, as kubectl's and events -w's.
func (src logSource) read(ctx context.Context, client *cri.Client, opts logs.Options, w *sourceWriter) error {
	defer w.Flush()
	err := logs.Read(ctx, src.path, opts, w, w, func(ctx context.Context) (bool, error) {
		resp, err := client.ContainerStatus(ctx, src.id, false)
		switch {
		case cri.IsUnavailable(err):
			return true, nil // as kubelet: a runtime restarting stops no container
		case cri.IsNotFound(err):
			return false, nil // removed
		case err != nil:
			return false, err
		}
		return resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("container %q in pod %q: its log file is gone (the container was removed, or its log rotated away at that moment): %w", src.container, src.pod, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("container %q in pod %q: %w (the runtime's log files are root's: run as root)", src.container, src.pod, err)
	}
	return fmt.Errorf("container %q in pod %q: %w", src.container, src.pod, err)
}

// findPod is the pod a name stands for, as everywhere in cri-prober: the
// one View.ByName picks among the runtime's pods (pods.Resolve), as
// status, probe and the state API pick it.
func findPod(ctx context.Context, client *cri.Client, namespace, name string) (*pods.Pod, error) {
	poller, err := cri.NewPoller(client, cri.PollerConfig{})
	if err != nil {
		return nil, err
	}
	snap, err := poller.Relist(ctx)
	if err != nil {
		return nil, err
	}
	p, ok := pods.Resolve(snap, pods.Inputs{}).ByName(namespace, name)
	if !ok || p.Sandbox == nil {
		return nil, fmt.Errorf("pod %q not found in namespace %q: the runtime has no sandbox of that name (cri-prober pods lists what it has)", name, namespace)
	}
	return p, nil
}

// instancesByName are the instances of each container of the pod's
// current sandbox, newest first (pods.Container.Instances: kubelet's
// order of a container's statuses).
func instancesByName(p *pods.Pod) map[string][]*cri.Container {
	out := map[string][]*cri.Container{}
	for _, c := range p.Containers {
		for _, i := range c.Instances {
			if i.SandboxID == p.Sandbox.ID {
				out[c.Name] = append(out[c.Name], i)
			}
		}
	}
	return out
}

// containerNames orders a pod's containers as they were first created:
// init containers first, then the others, as the pod's spec lists them
// (CRI keeps no spec).
func containerNames(byName map[string][]*cri.Container) []string {
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	first := func(name string) time.Time { return byName[name][len(byName[name])-1].CreatedAt }
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(first(a).Compare(first(b)), strings.Compare(a, b)) })
	return names
}

// chooseContainers says whose logs to print, with kubectl's defaults.
func (o *logsOptions) chooseContainers(cmd *cobra.Command, p *pods.Pod, byName map[string][]*cri.Container, container string) ([]string, error) {
	pod := p.Name
	names := containerNames(byName)
	switch {
	case container != "":
		if _, ok := byName[container]; !ok {
			return nil, fmt.Errorf("container %q in pod %q is not available: the runtime has none of that name in the pod (%s); one not created yet has no log", container, pod, describeNames(names))
		}
		return []string{container}, nil
	case len(names) == 0:
		return nil, fmt.Errorf("pod %q has no containers yet: no logs to print", pod)
	case o.allContainers:
		return names, nil
	case len(names) == 1:
		return names, nil
	}
	if d := p.Sandbox.Annotations[defaultContainerAnnotation]; d != "" {
		if _, ok := byName[d]; ok {
			return []string{d}, nil
		}
		safef(cmd.ErrOrStderr(), "Default container name %q not found in pod %s\n", bounded.String(d, bounded.Message), pod) // a sandbox annotation: anyone's
	}
	return nil, usageErrorf(cmd, "pod %q has %d containers: say which with -c (one of %s), or use --all-containers", pod, len(names), terminalSafe(strings.Join(names, ", ")))
}

func describeNames(names []string) string {
	if len(names) == 0 {
		return "it has none yet"
	}
	return "it has " + strings.Join(names, ", ")
}

// safeError shows an error made of what the runtime reported (container
// names, log paths, in the errors of opening them) through terminalSafe:
// main prints errors as they are.
type safeError struct{ err error }

func (e safeError) Error() string { return terminalSafe(e.err.Error()) }
func (e safeError) Unwrap() error { return e.err }

// resolveSource picks the instance whose log to read, by kubelet's rules
// (validateContainerLogStatus), and asks the runtime for its log file.
// instances are newest first.
func resolveSource(ctx context.Context, client *cri.Client, pod, name string, instances []*cri.Container, previous bool) (logSource, error) {
	current := instances[0]
	var last *cri.Container // the newest exited before the current one: kubelet's lastState.terminated
	for _, c := range instances[1:] {
		if c.State == cri.StateExited {
			last = c
			break
		}
	}
	var chosen *cri.Container
	switch state := current.State; {
	case previous && last == nil:
		return logSource{}, fmt.Errorf("previous terminated container %q in pod %q not found: it has not restarted (or its previous instance was removed); without -p, the current one's log", name, pod)
	case previous:
		chosen = last
	case state == cri.StateRunning, state == cri.StateExited:
		chosen = current
	case last != nil:
		chosen = last // waiting to start again: its last run's log, as kubelet shows it
	case state == cri.StateCreated:
		return logSource{}, fmt.Errorf("container %q in pod %q is waiting to start: ContainerCreating; its log begins once it has started", name, pod)
	default:
		return logSource{}, fmt.Errorf("container %q in pod %q is in an unknown state: the runtime cannot say whether it ran (crictl inspect %s)", name, pod, shortID(current.ID))
	}

	resp, err := client.ContainerStatus(ctx, chosen.ID, false)
	if err != nil {
		return logSource{}, fmt.Errorf("container %q in pod %q: %w", name, pod, err)
	}
	path := resp.GetStatus().GetLogPath()
	switch {
	case path == "":
		return logSource{}, fmt.Errorf("container %q in pod %q has no log file: it was created without a log path (a CRI client sets log_directory in the pod sandbox's config and log_path in the container's; kubelet always does)", name, pod)
	case !filepath.IsAbs(path):
		return logSource{}, fmt.Errorf("container %q in pod %q has log path %q, relative to the runtime's working directory: its pod sandbox was created without log_directory", name, pod, path)
	}
	return logSource{pod: pod, container: name, id: chosen.ID, path: path}, nil
}

// lockedWriter serialises the writes of sources followed at once.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// maxHeld bounds a line held whole while several sources are followed: a
// longer one goes out in pieces.
const maxHeld = 64 << 10

// sourceWriter writes one source's log: with --prefix, its name starts
// every line; held, lines go out whole (as kubectl's do when it follows
// several containers), so that sources interleave by line, not inside
// one.
type sourceWriter struct {
	out     io.Writer
	prefix  []byte
	held    bool
	buf     []byte
	midLine bool // the last byte out ended no line: no prefix before the next
}

func (s *sourceWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		piece := p
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			piece = p[:i+1]
		}
		p = p[len(piece):]
		ends := piece[len(piece)-1] == '\n'
		if !s.held {
			if err := s.emit(piece, ends); err != nil {
				return 0, err
			}
			continue
		}
		s.buf = append(s.buf, piece...)
		if ends || len(s.buf) >= maxHeld {
			if err := s.emit(s.buf, ends); err != nil {
				return 0, err
			}
			s.buf = s.buf[:0]
		}
	}
	return n, nil
}

// emit writes a piece of a line in one write, its prefix first if it
// starts a line.
func (s *sourceWriter) emit(piece []byte, ends bool) error {
	if len(s.prefix) > 0 && !s.midLine {
		piece = append(s.prefix[:len(s.prefix):len(s.prefix)], piece...)
	}
	s.midLine = !ends
	_, err := s.out.Write(piece)
	return err
}

// Flush writes a line held when the source ends.
func (s *sourceWriter) Flush() {
	if len(s.buf) > 0 {
		_ = s.emit(s.buf, false)
		s.buf = s.buf[:0]
	}
}

// terminalWriter shows a container's log on a terminal without letting it
// drive the terminal: a workload's output is hostile input, and escape
// sequences can rewrite the screen, set the window title, write the
// clipboard (OSC 52), or make the terminal answer into the shell's input.
// kubectl passes them through; here every control character but newline
// and tab is shown as \xNN, a carriage return too unless it ends a line
// (\r\n; a lone one can overwrite what was shown), as are C1 controls
// and bidirectional overrides (\uNNNN: they make a line read as another)
// and bytes that are no UTF-8. The rest, line breaks and Unicode
// included, is left alone, so a log reads as it was written.
type terminalWriter struct {
	w    io.Writer
	pend []byte // a '\r' or the start of a UTF-8 character: what follows decides
	buf  []byte
}

func (t *terminalWriter) Write(p []byte) (int, error) {
	data := p
	if len(t.pend) > 0 {
		data = append(t.pend, p...)
		t.pend = nil
	}
	b := t.buf[:0]
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f):
			b = append(b, c)
			i++
		case c == '\r' && i+1 == len(data):
			t.pend = append(t.pend, c)
			i++
		case c == '\r' && data[i+1] == '\n':
			b = append(b, "\r\n"...)
			i += 2
		case c < 0x80:
			b = fmt.Appendf(b, `\x%02x`, c)
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			switch {
			case r == utf8.RuneError && size <= 1 && !utf8.FullRune(data[i:]):
				t.pend = append(t.pend, data[i:]...) // cut by the end of this write
				i = len(data)
			case r == utf8.RuneError && size <= 1:
				b = fmt.Appendf(b, `\x%02x`, c)
				i++
			case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r):
				b = fmt.Appendf(b, `\u%04x`, r)
				i += size
			default:
				b = append(b, data[i:i+size]...)
				i += size
			}
		}
	}
	t.buf = b
	if _, err := t.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush shows what was held for the next write, as it is shown alone.
func (t *terminalWriter) Flush() {
	for _, c := range t.pend {
		fmt.Fprintf(t.w, `\x%02x`, c)
	}
	t.pend = nil
}
