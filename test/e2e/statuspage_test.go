//go:build e2e

package e2e

import (
	"bytes"
	"image/png"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Contract (issue 16, item 5): the status page at / of the state API shows
// a person the pods, their containers and readiness, each probe's recent
// runs as a chart, the restarts with why and the events, and keeps itself
// up to date from the event stream: a probe that starts failing shows as
// Warning events, then as a restart with its reason, without a reload.
// What workloads print is shown as text, never run. Checked in Debian's
// headless Chromium, as a person would see it (rendered text).
//
// With CRI_PROBER_E2E_SCREENSHOT=/abs/path.png the page is saved there as
// PNG (docs/status-page.png is one).
func TestStatusPage(t *testing.T) {
	c := dial(t)
	name := uniqueName("page")
	// web: liveness that a file turns to failure (a restart follows);
	// hostile: a readiness probe that prints markup and fails.
	dir := manifestDir(t, name, `  - name: web
    image: localhost/target:test
    livenessProbe:
      httpGet: {port: 8080, path: /healthz}
      periodSeconds: 1
      failureThreshold: 2
      terminationGracePeriodSeconds: 2
    readinessProbe:
      httpGet: {port: 8080, path: /ready}
      periodSeconds: 1
  - name: hostile
    image: localhost/busybox:test
    readinessProbe:
      exec:
        command: [sh, -c, 'echo "<b id=pwned>bold</b><img src=x id=img>"; exit 1']
      periodSeconds: 1
`)
	listen := freePort(t)
	agent := startBinary(t, dir, listen)
	pod := runPodNamed(t, c, name, nil)
	web := pod.startContainer(container{name: "web", image: targetImage})
	pod.start("hostile", "sleep", "3600")
	eventually(t, 15*time.Second, "web ready, with a few runs of its probes", func() bool {
		ctr, ok := agent.container(t, name, "web")
		return ok && ctr.Ready && ctr.Probes["liveness"].Consecutive >= 3
	})

	b := startBrowser(t)
	b.open(agent.server + "/")
	podSel := `article[id="pod-` + testNamespace + `/` + name + `"]`

	// Step 1: the pod as a person sees it.
	var podText string
	eventually(t, 10*time.Second, "the pod on the page", func() bool {
		podText = b.text(podSel)
		return strings.Contains(podText, "Ready 1/2")
	})
	assert.Contains(t, podText, testNamespace+"/"+name)
	assert.Regexp(t, `web\s+Running\s+ready\s+0`, podText, "container web: state, ready, restarts")
	assert.Regexp(t, `hostile\s+Running\s+not ready\s+0`, podText)
	assert.Regexp(t, `liveness\s+success`, podText)
	var bars int
	b.js(&bars, `return document.querySelectorAll(arguments[0] + ' svg.chart[aria-label^="liveness"] rect.run.success').length;`, podSel)
	assert.GreaterOrEqual(t, bars, 3, "the liveness probe's recent runs as a chart")
	eventually(t, 10*time.Second, "the page follows the event stream", func() bool {
		return strings.HasPrefix(b.text("#live"), "live")
	})

	// Step 2: what the workload printed is text on the page, not markup.
	assert.Contains(t, podText, `<b id=pwned>bold</b><img src=x id=img>`)
	var injected bool
	b.js(&injected, `return document.getElementById('pwned') !== null || document.getElementById('img') !== null;`)
	assert.False(t, injected, "no element made from probe output")
	eventually(t, 10*time.Second, "the probe's output in an event, as text", func() bool {
		return strings.Contains(b.text("#events-body"), "Readiness probe failed: <b id=pwned>bold</b><img src=x id=img>")
	})
	b.js(&injected, `return document.getElementById('pwned') !== null || document.getElementById('img') !== null;`)
	assert.False(t, injected, "no element made from an event's message")

	// Step 3: liveness starts failing. Without a reload, the Warning events
	// appear, then the restart with its reason, and the pod's restarts.
	b.js(nil, `window.e2eSamePage = true;`)
	pod.exec(web, "touch", "/tmp/unhealthy")
	eventually(t, 15*time.Second, "a Warning event for the failing probe, live", func() bool {
		var warnings []string
		b.js(&warnings, `return Array.from(document.querySelectorAll('#events-body tr.warning'), (r) => r.innerText);`)
		for _, w := range warnings {
			if strings.Contains(w, name+"/web") && strings.Contains(w, "Liveness probe failed: HTTP probe failed with statuscode: 500") &&
				strings.Contains(w, "⚠ Warning") {
				return true
			}
		}
		return false
	})
	eventually(t, 30*time.Second, "the restart, with why, live", func() bool {
		restarts := b.text("#restarts")
		return strings.Contains(restarts, testNamespace+"/"+name+"/web") &&
			strings.Contains(restarts, "its liveness probe failed 2 time(s) in a row (failureThreshold 2): HTTP probe failed with statuscode: 500") &&
			strings.Contains(restarts, "restarted as attempt 1")
	})
	eventually(t, 30*time.Second, "the pod shows its restart, and web ready again", func() bool {
		podText = b.text(podSel)
		return strings.Contains(podText, "restarts 1") && regexp.MustCompile(`web\s+Running\s+ready\s+1`).MatchString(podText)
	})
	eventually(t, 15*time.Second, "the new instance's liveness probe run, on the page", func() bool {
		// No event says a probe passed: the failing hostile container's
		// events bring the page up to date.
		return regexp.MustCompile(`liveness\s+success`).MatchString(b.text(podSel))
	})
	var samePage bool
	b.js(&samePage, `return window.e2eSamePage === true;`)
	assert.True(t, samePage, "all of it without a reload")

	// Step 4: the browser saw no script error and no violation of the
	// page's Content-Security-Policy (the marker shows the console is
	// read), and the policy is in force: Trusted Types refuse HTML from a
	// string.
	b.js(nil, `console.error('e2e-console-marker');`)
	marker := false
	for _, e := range b.console() {
		if strings.Contains(e.Message, "e2e-console-marker") {
			marker = true
			continue
		}
		assert.NotEqual(t, "SEVERE", e.Level, "console: %s", e.Message)
	}
	assert.True(t, marker, "the console log was read")
	var refused string
	b.js(&refused, `try { document.createElement('div').innerHTML = '<b>x</b>'; return 'allowed'; } catch (e) { return e.name; }`)
	assert.Equal(t, "TypeError", refused, "innerHTML with a string is refused")

	shot := b.screenshot()
	cfg, err := png.DecodeConfig(bytes.NewReader(shot))
	require.NoError(t, err, "a PNG screenshot")
	assert.Equal(t, 1280, cfg.Width)
	if path := os.Getenv("CRI_PROBER_E2E_SCREENSHOT"); path != "" {
		require.NoError(t, os.WriteFile(path, shot, 0o644))
		t.Logf("screenshot: %s", path)
	}
}
