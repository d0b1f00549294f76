//go:build e2e

package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Debian's Chromium and its ChromeDriver (hack/install-chromium.sh).
const (
	chromiumPath     = "/usr/bin/chromium"
	chromedriverPath = "/usr/bin/chromedriver"
)

// chromiumArgs run Chromium headless on this machine: without the
// background-networking flags it dials Google's hosts, which a closed
// network refuses (and which a test has no business calling).
var chromiumArgs = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-dev-shm-usage", "--force-device-scale-factor=1", "--hide-scrollbars", "--window-size=1280,1100",
}

// browser is a headless Chromium driven through chromedriver with the
// W3C WebDriver protocol (JSON over HTTP): no client library.
type browser struct {
	t       *testing.T
	driver  string // chromedriver's base URL
	session string
	client  *http.Client
}

// startBrowser starts chromedriver and a Chromium session with a fresh
// profile. Both are stopped by their PIDs when the test ends, pass or fail.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	for _, path := range []string{chromiumPath, chromedriverPath} {
		_, err := os.Stat(path)
		require.NoError(t, err, "hack/install-chromium.sh installs chromium and chromium-driver")
	}
	// Made before the cleanup below is registered, so removed after it has
	// stopped every process that writes there.
	profile := t.TempDir()
	_, port, err := net.SplitHostPort(freePort(t))
	require.NoError(t, err)
	logs := &lockedBuffer{}
	cmd := diesWithTheTest(exec.Command(chromedriverPath, "--port="+port))
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	b := &browser{t: t, driver: "http://127.0.0.1:" + port, client: &http.Client{Timeout: time.Minute}}
	t.Cleanup(func() {
		// Chromium's processes, found while chromedriver is their parent.
		chromium := descendants(cmd.Process.Pid)
		if b.session != "" {
			// Quitting the session closes Chromium; what is left of it
			// (a quit that failed) is killed below.
			b.call(http.MethodDelete, "/session/"+b.session, nil, nil) //nolint:errcheck // best effort
		}
		cmd.Process.Kill() //nolint:errcheck // it may have exited
		cmd.Wait()         //nolint:errcheck // killed
		for _, p := range chromium {
			p.kill()
		}
		// The profile is removed next: wait until nothing writes there.
		poll := time.NewTicker(20 * time.Millisecond)
		defer poll.Stop()
		deadline := time.After(10 * time.Second)
		for _, p := range chromium {
			for p.alive() {
				select {
				case <-poll.C:
				case <-deadline:
					t.Errorf("chromium process %d still runs after SIGKILL", p.pid)
					return
				}
			}
		}
		if t.Failed() {
			t.Logf("chromedriver log:\n%s", logs)
		}
	})
	eventually(t, 20*time.Second, "chromedriver ready", func() bool {
		var status struct{ Ready bool }
		return b.call(http.MethodGet, "/status", nil, &status) == nil && status.Ready
	})
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName":        "chrome",
		"goog:chromeOptions": map[string]any{"binary": chromiumPath, "args": append(chromiumArgs, "--user-data-dir="+profile)},
		"goog:loggingPrefs":  map[string]string{"browser": "ALL"},
	}}}
	var created struct{ SessionID string }
	require.NoError(t, b.call(http.MethodPost, "/session", caps, &created), "start Chromium")
	b.session = created.SessionID
	return b
}

// call sends a WebDriver command and decodes its value into out.
func (b *browser) call(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, b.driver+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return fmt.Errorf("webdriver %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	var reply struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return fmt.Errorf("webdriver %s %s: %s: %w", method, path, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error, Message string }
		json.Unmarshal(reply.Value, &e) //nolint:errcheck // the status says enough
		return fmt.Errorf("webdriver %s %s: %s: %s: %s", method, path, resp.Status, e.Error, e.Message)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(reply.Value, out)
}

func (b *browser) command(method, path string, in, out any) {
	b.t.Helper()
	require.NoError(b.t, b.call(method, "/session/"+b.session+path, in, out))
}

// open navigates to url and waits for the page to load.
func (b *browser) open(url string) {
	b.t.Helper()
	b.command(http.MethodPost, "/url", map[string]string{"url": url}, nil)
}

// js runs script (a function body, its arguments in arguments[]) in the
// page and decodes what it returns into out.
func (b *browser) js(out any, script string, args ...any) {
	b.t.Helper()
	if args == nil {
		args = []any{}
	}
	b.command(http.MethodPost, "/execute/sync", map[string]any{"script": script, "args": args}, out)
}

// text is the text a person sees in the first element matching selector
// (innerText: as rendered), "" if there is none.
func (b *browser) text(selector string) string {
	b.t.Helper()
	var s *string
	b.js(&s, "const e = document.querySelector(arguments[0]); return e ? e.innerText : null;", selector)
	if s == nil {
		return ""
	}
	return *s
}

// screenshot returns the viewport as PNG.
func (b *browser) screenshot() []byte {
	b.t.Helper()
	var encoded string
	b.command(http.MethodGet, "/screenshot", nil, &encoded)
	png, err := base64.StdEncoding.DecodeString(encoded)
	require.NoError(b.t, err)
	return png
}

// consoleEntry is a line of the browser's console log.
type consoleEntry struct {
	Level   string
	Message string
}

// console returns the console's entries since the last call: script
// errors and Content-Security-Policy violations show there.
func (b *browser) console() []consoleEntry {
	b.t.Helper()
	var entries []consoleEntry
	b.command(http.MethodPost, "/se/log", map[string]string{"type": "browser"}, &entries)
	return entries
}

// process is a process found running, by PID and start time: a PID can be
// reused once the process is gone, its start time cannot.
type process struct {
	pid   int
	start string
}

// descendants are the processes below pid, found in /proc.
func descendants(pid int) []process {
	children := map[int][]process{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		ppid, _, start, err := procStat(p)
		if err == nil {
			children[ppid] = append(children[ppid], process{pid: p, start: start})
		}
	}
	var out []process
	queue := []int{pid}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		for _, c := range children[next] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// procStat reads a process's parent, state (R, S, Z…) and start time
// from /proc/PID/stat.
func procStat(pid int) (ppid int, state, start string, err error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", "", err
	}
	// The command, in parentheses, may hold spaces: fields follow the last ')'.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, "", "", errors.New("no command in stat")
	}
	fields := strings.Fields(string(raw[i+1:]))
	if len(fields) < 20 {
		return 0, "", "", errors.New("short stat")
	}
	ppid, err = strconv.Atoi(fields[1])
	return ppid, fields[0], fields[19], err // starttime is stat's field 22
}

// alive says whether the process still runs (not a zombie, not reused).
func (p process) alive() bool {
	_, state, start, err := procStat(p.pid)
	return err == nil && start == p.start && state != "Z"
}

func (p process) kill() {
	if p.alive() {
		syscall.Kill(p.pid, syscall.SIGKILL) //nolint:errcheck // it may have just exited
	}
}
