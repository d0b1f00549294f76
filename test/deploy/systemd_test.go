//go:build deploy

package deploy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

const (
	unitPath       = "deploy/systemd/cri-prober.service"
	socketUnitPath = "deploy/systemd/cri-prober.socket"
)

// exposureThreshold is the highest `systemd-analyze security` exposure
// (in tenths) the unit may have: 3.4 ("OK") as shipped. Lower it when the
// unit gains hardening; never raise it without saying why in the unit.
const exposureThreshold = "34"

// installRoot lays out a root directory as make install does (DESTDIR),
// for the given PREFIX and SYSTEMDUNITDIR, with the host's own units so
// that systemd-analyze --root finds the targets the unit names.
func installRoot(t *testing.T, prefix, unitDir string) string {
	t.Helper()
	root := t.TempDir()
	hostUnits(t, root)
	run(t, repoRoot, []string{"DESTDIR=" + root, "PREFIX=" + prefix, "SYSTEMDUNITDIR=" + unitDir},
		filepath.Join(repoRoot, "hack/install.sh"), agentBinary(t))
	return root
}

// hostUnits copies the host's units (targets, slices) into root, for
// systemd-analyze --root=root to resolve the ones a unit names.
func hostUnits(t *testing.T, root string) {
	t.Helper()
	deployTools(t) // systemd-analyze, and the systemd package's units
	system, err := filepath.EvalSymlinks("/lib/systemd/system")
	if err != nil {
		t.Fatalf("the host's systemd units: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "lib/systemd"), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "", nil, "cp", "-a", system, filepath.Join(root, "lib/systemd/system"))
}

// verifyUnit runs `systemd-analyze verify` on cri-prober.service and
// cri-prober.socket as installed in root. verify says "ignoring" of unknown keys and bad
// values and still exits 0: any output is a failure.
func verifyUnit(t *testing.T, root string) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "systemd-analyze", "verify", "--root="+root, "cri-prober.service", "cri-prober.socket").CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify in %s: %v\n%s", root, err, out)
	}
}

// Contract (issue 16, item 7): the unit passes `systemd-analyze verify`
// with nothing to say, installed where make install puts it and where the
// .deb does, and its hardening does not regress.
func TestSystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	for _, layout := range []struct{ name, prefix, unitDir string }{
		{"make install", "/usr/local", "/etc/systemd/system"},
		{"deb", "/usr", "/lib/systemd/system"},
	} {
		t.Run(layout.name, func(t *testing.T) {
			t.Parallel()
			root := installRoot(t, layout.prefix, layout.unitDir)
			verifyUnit(t, root)
			out, err := exec.CommandContext(t.Context(), "systemd-analyze", "security", "--offline=true", "--no-pager",
				"--threshold="+exposureThreshold, "--root="+root, "cri-prober.service").CombinedOutput()
			if err != nil {
				t.Errorf("systemd-analyze security: exposure above %s tenths (%v):\n%s", exposureThreshold, err, out)
			}
		})
	}
}

// Contract: what the unit says about the agent matches what `run` does and
// what make install lays out.
func TestSystemdUnitSettings(t *testing.T) {
	t.Parallel()
	u := parseUnit(t, readFile(t, unitPath))
	var cfg map[string]any
	if err := yaml.UnmarshalStrict(readFile(t, "deploy/config.yaml"), &cfg); err != nil {
		t.Fatalf("deploy/config.yaml: %v", err)
	}
	for _, c := range []struct{ key, want, why string }{
		{"Type", "notify", "run tells systemd READY=1 after its first relist"},
		{"NotifyAccess", "main", "only the agent itself, not a --on-transition command, may notify"},
		{"Restart", "always", ""},
		{"User", "root", "the CRI socket's permissions"},
		{"StateDirectory", "cri-prober", "config.yaml's state-dir: /var/lib/cri-prober"},
		{"StateDirectoryMode", "0700", "the agent refuses a state directory others can write"},
	} {
		if got := u.get("Service", c.key); got != c.want {
			t.Errorf("[Service] %s=%s, want %s (%s)", c.key, got, c.want, c.why)
		}
	}
	if got, want := cfg["state-dir"], "/var/lib/"+u.get("Service", "StateDirectory"); got != want {
		t.Errorf("config.yaml state-dir: %v, want %s, the unit's StateDirectory", got, want)
	}
	if d, err := time.ParseDuration(u.get("Service", "WatchdogSec")); err != nil || d < 10*time.Second {
		t.Errorf("WatchdogSec=%s: want a duration of 10s or more (the agent pings at half of it)", u.get("Service", "WatchdogSec"))
	}
	if got := u.get("Unit", "StartLimitIntervalSec"); got != "0" {
		t.Errorf("StartLimitIntervalSec=%s, want 0: the agent exits while containerd is away at start and must keep being restarted", got)
	}
	argv := strings.Fields(u.get("Service", "ExecStart"))
	if len(argv) == 0 || argv[0] != "/usr/local/bin/cri-prober" {
		t.Errorf("ExecStart=%v: want /usr/local/bin/cri-prober, where make install puts it (hack/install.sh rewrites that path)", argv)
	}
	if i := slices.Index(argv, "--config"); i < 0 || i+1 >= len(argv) || argv[i+1] != "/etc/cri-prober/config.yaml" {
		t.Errorf("ExecStart=%v: want --config /etc/cri-prober/config.yaml, where make install puts deploy/config.yaml", argv)
	}
	// The state API on the sockets systemd binds and holds across the
	// agent's restarts: no local user can take its address in between.
	if !slices.Contains(argv, "--web.systemd-socket") {
		t.Errorf("ExecStart=%v: want --web.systemd-socket, to serve cri-prober.socket's sockets", argv)
	}
	if !slices.Contains(u.list("Unit", "Requires"), "cri-prober.socket") || !slices.Contains(u.list("Unit", "After"), "cri-prober.socket") {
		t.Error("want Requires= and After=cri-prober.socket: the agent serves its sockets")
	}
	if _, ok := u["Service"]["RuntimeDirectory"]; ok {
		t.Error("RuntimeDirectory=: the service would remove /run/cri-prober, and the socket unit's api.sock with it, whenever it stops")
	}
	sock := parseUnit(t, readFile(t, socketUnitPath))
	streams := sock.list("Socket", "ListenStream")
	if !slices.Contains(streams, "/run/cri-prober/api.sock") || sock.get("Socket", "SocketMode") != "0600" {
		t.Errorf("cri-prober.socket: want ListenStream=/run/cri-prober/api.sock with SocketMode=0600 (root's alone, the CLI's default): %v", streams)
	}
	if listen, _ := cfg["listen"].(string); !slices.Contains(streams, listen) {
		t.Errorf("cri-prober.socket: want ListenStream=%v, config.yaml's listen:, where Prometheus and run by hand find the agent: %v", cfg["listen"], streams)
	}
	if !slices.Contains(u.list("Unit", "Wants"), "containerd.service") {
		t.Error("Wants= lacks containerd.service")
	}
	for _, k := range []string{"BindsTo", "Requires", "PartOf"} {
		if slices.Contains(u.list("Unit", k), "containerd.service") {
			t.Errorf("%s=containerd.service: a containerd restart must not restart the agent (docs/deployment.md)", k)
		}
	}
}

// serviceSettings says, for every [Service] setting of the unit, how
// TestHostIPDiscoveryUnderUnitSandbox accounts for it. Host IP discovery
// reads /proc/net/route, then the addresses of the default route's
// interface over a netlink socket. A setting that could change that is
// applied in the test's sandbox ("applied"); the others say why not.
var serviceSettings = map[string]string{
	"RestrictAddressFamilies": "applied",
	"CapabilityBoundingSet":   "applied",
	"AmbientCapabilities":     "applied (empty: none)",
	"NoNewPrivileges":         "applied",
	"User":                    "root, as the test runs; discovery needs no privilege",
	"Type":                    "TestSystemdNotify",
	"NotifyAccess":            "TestSystemdNotify",
	"WatchdogSec":             "TestSystemdNotify",
	"ExecStart":               "the command the test runs",
	"Restart":                 "not about a running agent",
	"RestartSec":              "not about a running agent",
	"ProtectSystem":           "read-only mounts; /proc is left readable",
	"ProtectHome":             "hides /home, /root, /run/user",
	"PrivateTmp":              "its own /tmp",
	"PrivateDevices":          "its own /dev",
	"ProtectKernelTunables":   "/proc/sys and /sys read-only; /proc/net/route is read only",
	"ProtectKernelModules":    "module loading",
	"ProtectKernelLogs":       "the kernel log",
	"ProtectControlGroups":    "/sys/fs/cgroup read-only",
	"ProtectClock":            "setting the clock",
	"ProtectHostname":         "its own UTS namespace, not a network one",
	"ProtectProc":             "invisible: other users' processes hidden; /proc/net stays (ProcSubset=pid would hide it)",
	"RestrictNamespaces":      "creating or joining namespaces; discovery does neither",
	"RestrictRealtime":        "realtime scheduling",
	"RestrictSUIDSGID":        "set-user-ID files",
	"LockPersonality":         "personality(2)",
	"SystemCallArchitectures": "native: the agent is a native binary",
	"UMask":                   "modes of created files",
	"ReadOnlyPaths":           "/etc/cri-prober read-only",
	"StateDirectory":          "a writable /var/lib/cri-prober",
	"StateDirectoryMode":      "its mode",
}

// refused are settings that break host IP discovery, with why.
var refused = map[string]string{
	"PrivateNetwork":       "a network namespace of its own has no default route: host-network pods would be probed at 127.0.0.1",
	"NetworkNamespacePath": "another network namespace than the node's",
	"ProcSubset":           "pid hides /proc/net/route",
	"PrivateUsers":         "a user namespace: uid 0 would no longer own the CRI socket",
}

// unitSandbox is the sandbox of the unit's [Service] settings.
func unitSandbox(t *testing.T, u unitFile) sandbox {
	t.Helper()
	for key := range u["Service"] {
		if why, ok := refused[key]; ok {
			t.Errorf("[Service] %s: %s", key, why)
			continue
		}
		if _, ok := serviceSettings[key]; !ok {
			t.Errorf("[Service] %s: say in serviceSettings whether it can change host IP discovery, and apply it in the sandbox if it can", key)
		}
	}
	families := u.list("Service", "RestrictAddressFamilies")
	if len(families) == 0 || strings.HasPrefix(families[0], "~") {
		t.Fatalf("RestrictAddressFamilies=%v: the test reads an allow list", families)
	}
	if caps := u.list("Service", "CapabilityBoundingSet"); len(caps) != 0 {
		t.Fatalf("CapabilityBoundingSet=%v: the test applies an empty one only", caps)
	}
	if caps := u.list("Service", "AmbientCapabilities"); len(caps) != 0 {
		t.Fatalf("AmbientCapabilities=%v: the test applies none only", caps)
	}
	return sandbox{Families: families, NoNewPrivileges: u.get("Service", "NoNewPrivileges") == "yes", NoCapabilities: true}
}

// agentProcess is the agent run as the unit runs it, against a fake
// runtime, its log read line by line.
type agentProcess struct {
	t       *testing.T
	cmd     *exec.Cmd
	runtime *fakeruntime.Runtime
	lines   chan string
	term    sync.Once     // SIGTERM is sent once: a second one makes the agent exit at once
	done    chan struct{} // closed when the process has exited
	waitErr error
	// apiAddr is the state API's address, for an agent started with the
	// unit's socket (startUnitAgent).
	apiAddr string
}

// startUnitAgent runs the unit's ExecStart (its config file read from
// deploy/), against a fake runtime and with nothing written outside the
// test's directories, under sb (nil: unrestricted), with env added.
func startUnitAgent(t *testing.T, sb *sandbox, env ...string) *agentProcess {
	t.Helper()
	u := parseUnit(t, readFile(t, unitPath))
	argv := strings.Fields(u.get("Service", "ExecStart"))
	for i, a := range argv {
		if a == "/etc/cri-prober/config.yaml" {
			argv[i] = filepath.Join(repoRoot, "deploy/config.yaml")
		}
	}
	rt := fakeruntime.NewForTest(t)
	dir := t.TempDir()
	args := append(argv[1:],
		"--runtime-endpoint="+rt.Endpoint(), "--containerd-address=none",
		"--pod-manifests="+dir, "--state-dir="+filepath.Join(dir, "state"))
	// The socket of cri-prober.socket, passed as systemd passes it (fd 3,
	// LISTEN_FDS; the launcher sets LISTEN_PID): a loopback port of the
	// test's instead of 9440, which may be taken on this machine.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	socket, err := l.(*net.TCPListener).File()
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { socket.Close() })
	if sb == nil {
		sb = &sandbox{} // no restriction, but the launcher's LISTEN_PID
	}
	p := startAgentWithFiles(t, sb, rt, args, []*os.File{socket}, append(env, "LISTEN_FDS=1")...)
	p.apiAddr = l.Addr().String()
	return p
}

// startAgent runs the agent with args (the runtime rt's endpoint among
// them) under sb (nil: unrestricted), with env added; the test's end
// stops it.
func startAgent(t *testing.T, sb *sandbox, rt *fakeruntime.Runtime, args []string, env ...string) *agentProcess {
	t.Helper()
	return startAgentWithFiles(t, sb, rt, args, nil, env...)
}

// startAgentWithFiles is startAgent with files passed from fd 3 on.
func startAgentWithFiles(t *testing.T, sb *sandbox, rt *fakeruntime.Runtime, args []string, files []*os.File, env ...string) *agentProcess {
	t.Helper()
	var cmd *exec.Cmd
	if sb != nil {
		cmd = sandboxedCommand(t, *sb, agentBinary(t), args...)
	} else {
		cmd = exec.Command(agentBinary(t), args...)
	}
	cmd.Env = append(cmd.Environ(), env...)
	cmd.ExtraFiles = files
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	p := &agentProcess{t: t, cmd: cmd, runtime: rt, lines: make(chan string, 1000), done: make(chan struct{})}
	var readers sync.WaitGroup
	readers.Go(func() {
		defer close(p.lines)
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	})
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		for range p.lines { // the log the test did not read
		}
		readers.Wait()
	})
	return p
}

// stop ends the agent with SIGTERM (SIGKILL after 10 s) and waits for it.
func (p *agentProcess) stop() error {
	select {
	case <-p.done:
		return p.waitErr
	default:
	}
	p.term.Do(func() { p.cmd.Process.Signal(syscall.SIGTERM) })
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
	return p.waitErr
}

// waitLog returns the submatches of the first log line matching re, or
// fails the test after timeout, with the log seen so far.
func (p *agentProcess) waitLog(re *regexp.Regexp, timeout time.Duration) []string {
	p.t.Helper()
	deadline := time.After(timeout)
	var seen []string
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				<-p.done
				p.t.Fatalf("the agent exited (%v) before logging %s:\n%s", p.waitErr, re, strings.Join(seen, "\n"))
			}
			seen = append(seen, line)
			if m := re.FindStringSubmatch(line); m != nil {
				return m
			}
		case <-deadline:
			p.t.Fatalf("no log line matching %s within %s:\n%s", re, timeout, strings.Join(seen, "\n"))
		}
	}
}

var probingLine = regexp.MustCompile(`"Probing".* hostIP="([^"]*)"`)

// Contract (issue 16, item 7): under the unit's sandbox the agent finds
// the node's address, as it does unrestricted, instead of falling back
// to 127.0.0.1 (the unit used to forbid netlink sockets). A control run
// without AF_NETLINK shows that the sandbox applied is the one that bites.
func TestHostIPDiscoveryUnderUnitSandbox(t *testing.T) {
	t.Parallel()
	u := parseUnit(t, readFile(t, unitPath))
	sb := unitSandbox(t, u)
	for _, f := range []string{"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"} {
		if !slices.Contains(sb.Families, f) {
			t.Errorf("RestrictAddressFamilies=%v lacks %s", sb.Families, f)
		}
	}

	free := startUnitAgent(t, nil)
	want := free.waitLog(probingLine, 30*time.Second)[1]
	free.stop()
	if want == "127.0.0.1" {
		t.Skip("this machine has no default route with an IPv4 address: nothing to tell apart")
	}

	t.Run("unit's sandbox", func(t *testing.T) {
		p := startUnitAgent(t, &sb)
		if got := p.waitLog(probingLine, 30*time.Second)[1]; got != want {
			t.Errorf("under the unit's sandbox the agent probes host-network pods at %s, unrestricted at %s", got, want)
		}
	})
	t.Run("control: no AF_NETLINK", func(t *testing.T) {
		control := sb
		control.Families = slices.DeleteFunc(slices.Clone(sb.Families), func(f string) bool { return f == "AF_NETLINK" })
		p := startUnitAgent(t, &control)
		p.waitLog(regexp.MustCompile(`Cannot find the node's address`), 30*time.Second)
		if got := p.waitLog(probingLine, 10*time.Second)[1]; got != "127.0.0.1" {
			t.Errorf("without AF_NETLINK the agent found %s: the test's sandbox does not restrict it", got)
		}
	})
}

// Contract: Type=notify and WatchdogSec= match what `run` does: READY=1
// once its first relist is done, then WATCHDOG=1 at half the watchdog
// interval (systemd passes it as WATCHDOG_USEC; shortened here), STOPPING=1
// on SIGTERM; all from under the unit's sandbox.
func TestSystemdNotify(t *testing.T) {
	t.Parallel()
	u := parseUnit(t, readFile(t, unitPath))
	sb := unitSandbox(t, u)
	if u.get("Service", "Type") != "notify" {
		t.Skip("not Type=notify")
	}
	// Unix socket paths are limited to 108 bytes; t.TempDir can be longer.
	dir, err := os.MkdirTemp("", "notify")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	const interval = time.Second
	messages := make(chan string, 100)
	go func() {
		defer close(messages)
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			for _, m := range strings.Split(strings.TrimSpace(string(buf[:n])), "\n") {
				select {
				case messages <- m:
				default: // nobody reads any more
				}
			}
		}
	}()
	p := startUnitAgent(t, &sb, "NOTIFY_SOCKET="+sock, fmt.Sprintf("WATCHDOG_USEC=%d", interval.Microseconds()))
	next := func(timeout time.Duration) (string, time.Time) {
		t.Helper()
		select {
		case m := <-messages:
			return m, time.Now()
		case <-time.After(timeout):
			t.Fatalf("no sd_notify message within %s", timeout)
		case <-p.done:
			t.Fatalf("the agent exited: %v", p.waitErr)
		}
		return "", time.Time{}
	}

	if m, _ := next(30 * time.Second); m != "READY=1" {
		t.Fatalf("first message %q, want READY=1", m)
	}
	if p.runtime.Calls("ListContainers") == 0 {
		t.Error("READY=1 before the first relist")
	}
	var pings []time.Time
	for len(pings) < 3 {
		m, at := next(2 * interval)
		if m != "WATCHDOG=1" {
			t.Fatalf("message %q, want WATCHDOG=1", m)
		}
		pings = append(pings, at)
	}
	if gap := pings[2].Sub(pings[1]); gap > interval*3/4 {
		t.Errorf("WATCHDOG=1 every %s with WATCHDOG_USEC=%d: want about half of it", gap, interval.Microseconds())
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	p.term.Do(func() { p.cmd.Process.Signal(syscall.SIGTERM) })
	for {
		select {
		case m := <-messages:
			if m == "STOPPING=1" {
				if err := p.stop(); err != nil {
					t.Errorf("the agent's exit on SIGTERM: %v", err)
				}
				return
			}
		case <-ctx.Done():
			t.Fatal("no STOPPING=1 after SIGTERM")
		}
	}
}

// The drop-in for making pods (deploy/systemd/static-pods.conf) verifies
// beside the unit, installed as docs/deployment.md says, and undoes every
// setting of the unit that gives the agent a mount namespace of its own:
// there, the volumes it mounts for its pods (a memory emptyDir's tmpfs,
// subPath bind mounts) would not be seen by containerd. A new such setting
// in the unit fails this test until the drop-in undoes it too.
func TestSystemdStaticPodsDropIn(t *testing.T) {
	t.Parallel()
	root := installRoot(t, "/usr/local", "/etc/systemd/system")
	shipped := filepath.Join(root, "usr/local/share/cri-prober/systemd/static-pods.conf")
	dropIn := readFile(t, "deploy/systemd/static-pods.conf")
	if got, err := os.ReadFile(shipped); err != nil || string(got) != string(dropIn) {
		t.Fatalf("make install does not ship the drop-in at %s: %v", shipped, err)
	}
	dir := filepath.Join(root, "etc/systemd/system/cri-prober.service.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "static-pods.conf"), dropIn, 0o644); err != nil {
		t.Fatal(err)
	}
	verifyUnit(t, root)

	unit := parseUnit(t, readFile(t, unitPath))["Service"]
	d := parseUnit(t, dropIn)["Service"]
	// Each setting that makes a mount namespace, and the value that does not.
	mountNamespace := map[string]string{
		"PrivateTmp": "no", "PrivateDevices": "no", "PrivateMounts": "no", "ProtectSystem": "no", "ProtectHome": "no",
		"ProtectKernelTunables": "no", "ProtectKernelModules": "no", "ProtectKernelLogs": "no", "ProtectControlGroups": "no",
		"ProtectProc": "default", "ProcSubset": "all", "ReadOnlyPaths": "", "ReadWritePaths": "", "InaccessiblePaths": "",
		"TemporaryFileSystem": "", "BindPaths": "", "BindReadOnlyPaths": "", "MountAPIVFS": "no",
	}
	for key, off := range mountNamespace {
		if _, set := unit[key]; !set {
			continue
		}
		vals, undone := d[key]
		last := ""
		if len(vals) > 0 {
			last = vals[len(vals)-1]
		}
		if !undone || last != off {
			t.Errorf("the unit sets %s, a mount namespace of the agent's own: the drop-in must set %s=%s", key, key, off)
		}
	}
	if caps := d["CapabilityBoundingSet"]; len(caps) == 0 || !strings.Contains(caps[len(caps)-1], "CAP_SYS_ADMIN") {
		t.Errorf("the drop-in must give CAP_SYS_ADMIN (mounting the pods' volumes): %v", caps)
	}
}

// The unit serves the state API on the sockets systemd passes (the
// socket unit binds them at boot and holds them across the agent's
// restarts), not on an address of its own: a local user cannot take it.
// Fails on the old unit: it had the agent bind config.yaml's listen:.
func TestSystemdSocketActivation(t *testing.T) {
	t.Parallel()
	u := parseUnit(t, readFile(t, unitPath))
	sb := unitSandbox(t, u)
	p := startUnitAgent(t, &sb)
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get("http://" + p.apiAddr + "/metrics")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), "cri_prober_api_up 1") {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("the agent exited: %v", p.waitErr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the state API is not served on the socket systemd passed (%s): %v", p.apiAddr, err)
		}
	}
}
