//go:build deploy

package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The agent under the unit's sandbox, without systemd: systemd is not PID 1
// on the machines the tests run on (no systemd-run), so the settings that
// can change what the agent finds are applied here the way systemd applies
// them, to the process that then executes the agent:
//   - RestrictAddressFamilies=: a seccomp filter on socket(2) that fails
//     other families with EAFNOSUPPORT (systemd's own filter, in
//     src/shared/seccomp-util.c, does the same on socket's first argument);
//   - CapabilityBoundingSet= (empty): every capability dropped from the
//     bounding set, so the agent, although uid 0, holds none after exec;
//   - NoNewPrivileges=yes: PR_SET_NO_NEW_PRIVS.
// Settings that only change the mount, UTS or other namespaces are not
// applied: unitSettings says, for each of the unit's settings, why it
// cannot change host IP discovery.

// sandboxEnv carries the sandbox to the launcher (TestMain).
const sandboxEnv = "CRI_PROBER_TEST_SANDBOX"

// sandbox is what the launcher applies before it executes the command.
type sandbox struct {
	// Families are the address families socket(2) may create (AF_ names);
	// nil: any.
	Families []string `json:"families"`
	// NoNewPrivileges sets PR_SET_NO_NEW_PRIVS.
	NoNewPrivileges bool `json:"noNewPrivileges"`
	// NoCapabilities empties the bounding, effective, permitted and
	// inheritable capability sets.
	NoCapabilities bool `json:"noCapabilities"`
}

var addressFamilies = map[string]uint32{
	"AF_UNIX": unix.AF_UNIX, "AF_LOCAL": unix.AF_LOCAL, "AF_INET": unix.AF_INET, "AF_INET6": unix.AF_INET6,
	"AF_NETLINK": unix.AF_NETLINK, "AF_PACKET": unix.AF_PACKET, "AF_VSOCK": unix.AF_VSOCK,
}

// sandboxedCommand returns a command that runs name under sb: the test
// binary itself, as the launcher, executes it once restricted.
func sandboxedCommand(t *testing.T, sb sandbox, name string, args ...string) *exec.Cmd {
	t.Helper()
	if _, ok := auditArch(); !ok {
		t.Skipf("no seccomp filter for %s in this test", runtime.GOARCH)
	}
	for _, f := range sb.Families {
		if _, ok := addressFamilies[f]; !ok {
			t.Fatalf("address family %s: unknown to this test; add it to addressFamilies", f)
		}
	}
	spec, err := json.Marshal(sb)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Env = append(os.Environ(), sandboxEnv+"="+string(spec))
	return cmd
}

// execSandboxed applies the sandbox in spec to this thread and executes
// argv in its place; it exits on any failure.
func execSandboxed(spec string, argv []string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(127)
	}
	var sb sandbox
	if err := json.Unmarshal([]byte(spec), &sb); err != nil {
		fail(err)
	}
	if len(argv) == 0 {
		fail(errors.New("no command"))
	}
	// Capabilities, no_new_privs and seccomp filters belong to a thread:
	// set them on this one and execute from it.
	runtime.LockOSThread()
	if sb.NoCapabilities {
		if err := dropCapabilities(); err != nil {
			fail(err)
		}
	}
	if sb.NoNewPrivileges || sb.Families != nil {
		// Also required to install a seccomp filter without CAP_SYS_ADMIN.
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			fail(fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err))
		}
	}
	if sb.Families != nil {
		if err := restrictAddressFamilies(sb.Families); err != nil {
			fail(err)
		}
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, sandboxEnv+"=") || strings.HasPrefix(kv, "LISTEN_PID=")
	})
	if os.Getenv("LISTEN_FDS") != "" {
		// Socket activation, as systemd does it: the sockets are for this
		// process, whose PID exec keeps.
		env = append(env, "LISTEN_PID="+strconv.Itoa(os.Getpid()))
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fail(err)
	}
	fail(syscall.Exec(path, argv, env))
}

// dropCapabilities empties the bounding set (what exec can grant, even to
// uid 0) and the thread's own sets, as CapabilityBoundingSet= with
// nothing after it does.
func dropCapabilities() error {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return err
	}
	last, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

func auditArch() (uint32, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, true
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, true
	}
	return 0, false
}

// restrictAddressFamilies installs a seccomp filter that lets socket(2)
// create only the given families and fails the others with EAFNOSUPPORT.
func restrictAddressFamilies(names []string) error {
	arch, _ := auditArch()
	const (
		offNr   = 0  // seccomp_data.nr
		offArch = 4  // seccomp_data.arch
		offArg0 = 16 // seccomp_data.args[0], its low 32 bits (little-endian)
	)
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: jt, Jf: jf, K: k}
	}
	load := func(off uint32) unix.SockFilter { return stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off) }
	ret := func(v uint32) unix.SockFilter { return stmt(unix.BPF_RET|unix.BPF_K, v) }

	prog := []unix.SockFilter{
		load(offArch),
		jeq(arch, 1, 0),
		ret(unix.SECCOMP_RET_ALLOW),
		load(offNr),
		jeq(unix.SYS_SOCKET, 1, 0),
		ret(unix.SECCOMP_RET_ALLOW),
		load(offArg0),
	}
	for i, name := range names {
		// Jump over the remaining comparisons and the refusal to the
		// final allow.
		prog = append(prog, jeq(addressFamilies[name], uint8(len(names)-i), 0))
	}
	prog = append(prog, ret(unix.SECCOMP_RET_ERRNO|uint32(unix.EAFNOSUPPORT)), ret(unix.SECCOMP_RET_ALLOW))
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("install the seccomp filter: %w", err)
	}
	return nil
}
