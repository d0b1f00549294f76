package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cri-prober/cri-prober/pkg/api"
)

// The agent's state API as the CLI finds it without --server: the unix
// socket of the systemd socket unit (root's alone, held by systemd), else
// the loopback port of an agent run by hand.
const (
	agentSocket       = "/run/cri-prober/api.sock"
	agentLoopbackPort = "127.0.0.1:9440"
)

// defaultServerURL is where the CLI asks when --server is not given.
func defaultServerURL() string {
	if fi, err := os.Stat(agentSocket); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		return "unix://" + agentSocket
	}
	return "http://" + agentLoopbackPort
}

// errNotTheAgent says that what answers on a local address is not the
// agent: its owner is neither root nor the user running the CLI.
var errNotTheAgent = errors.New("not the agent")

// checkLocalServer vets a connection to a server on this host: its
// process must be root's or the caller's. A local user can hold the
// agent's loopback port while the agent restarts and answer for it; the
// owner of a unix socket's peer (SO_PEERCRED) and of a loopback TCP
// listener (/proc/net/tcp) says who answers. Servers on other hosts are
// vetted by TLS (https://), not here.
func checkLocalServer(c net.Conn) error {
	var uid uint32
	switch conn := c.(type) {
	case *net.UnixConn:
		raw, err := conn.SyscallConn()
		if err != nil {
			return err
		}
		var cred *unix.Ucred
		var credErr error
		if err := raw.Control(func(fd uintptr) {
			cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		}); err != nil {
			return err
		}
		if credErr != nil {
			return fmt.Errorf("who serves %s: %w", c.RemoteAddr(), credErr)
		}
		uid = cred.Uid
	case *net.TCPConn:
		remote, ok := c.RemoteAddr().(*net.TCPAddr)
		if !ok || !remote.IP.IsLoopback() {
			return nil
		}
		owner, err := loopbackListenerOwner(remote.AddrPort())
		if err != nil {
			return fmt.Errorf("who serves %s: %w", remote, err)
		}
		uid = owner
	default:
		return nil
	}
	if uid != 0 && int(uid) != os.Geteuid() {
		return fmt.Errorf("%w: the process serving %s belongs to uid %d, neither root nor you, so it is not the agent (a local user may hold its address while the agent restarts); its answers are not trusted. Find it with `ss -ltnp`, and run the agent through its systemd socket unit (cri-prober.socket), which holds the address for it",
			errNotTheAgent, c.RemoteAddr(), uid)
	}
	return nil
}

// loopbackListenerOwner is the uid that owns the TCP socket listening on
// addr (or on the wildcard address of its port), from /proc/net/tcp and
// /proc/net/tcp6.
func loopbackListenerOwner(addr netip.AddrPort) (uint32, error) {
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		uid, found, err := listenerOwnerIn(table, addr)
		if err != nil {
			return 0, err
		}
		if found {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("no socket listens on %s in /proc/net/tcp", addr)
}

// listenerOwnerIn reads one of the kernel's TCP tables.
func listenerOwnerIn(table string, want netip.AddrPort) (uint32, bool, error) {
	f, err := os.Open(table)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 64<<20))
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid …
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || fields[3] != "0A" { // TCP_LISTEN
			continue
		}
		local, err := parseProcAddr(fields[1])
		if err != nil || local.Port() != want.Port() {
			continue
		}
		if ip := local.Addr().Unmap(); ip != want.Addr().Unmap() && !ip.IsUnspecified() {
			continue
		}
		uid, err := strconv.ParseUint(fields[7], 10, 32)
		if err != nil {
			return 0, false, fmt.Errorf("%s: uid %q: %w", table, fields[7], err)
		}
		return uint32(uid), true, nil
	}
	return 0, false, sc.Err()
}

// parseProcAddr reads an address of /proc/net/tcp{,6}: hex, each 32-bit
// word in host byte order, then :port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	if !ok || (len(hexIP) != 8 && len(hexIP) != 32) {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	var b [16]byte
	for w := 0; w < len(hexIP)/8; w++ {
		v, err := strconv.ParseUint(hexIP[w*8:w*8+8], 16, 32)
		if err != nil {
			return netip.AddrPort{}, err
		}
		// Each word was printed from memory as a host-order integer: its
		// bytes in memory are the address's.
		var word [4]byte
		binary.NativeEndian.PutUint32(word[:], uint32(v))
		copy(b[w*4:], word[:])
	}
	if len(hexIP) == 8 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[:4])), uint16(port)), nil
	}
	return netip.AddrPortFrom(netip.AddrFrom16(b), uint16(port)), nil
}

// agentClient is the client of the agent at server (--server; "": where
// the agent is found, defaultServerURL), which vets a server on this host
// (checkLocalServer).
func agentClient(server string) *api.Client {
	if server == "" {
		server = defaultServerURL()
	}
	return api.NewClient(server, checkLocalServer)
}
