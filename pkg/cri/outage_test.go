package cri_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/cri/fakeruntime"
)

// waitUntil polls cond every 10 ms until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, timeout, 10*time.Millisecond, what)
}

// Contract (issue 7): the runtime going away (its socket removed, nothing
// listening) is an error of the relist, not a change of the pods: the last
// snapshot stays, subscribers hear nothing, and the client reconnects by
// itself when the runtime is back (with kubelet's back-off: at most 3 s
// between attempts, where gRPC's default grows to two minutes).
func TestRuntimeOutageKeepsStateAndReconnects(t *testing.T) {
	rt := fakeruntime.NewForTest(t)
	rt.AddContainer(rt.AddSandbox("ns", "p", "u"), "app", running)
	socket := rt.Endpoint()[len("unix://"):]
	client := dialFake(t, rt)
	p, err := cri.NewPoller(client, cri.PollerConfig{RelistPeriod: 20 * time.Millisecond})
	require.NoError(t, err)
	sub := p.Subscribe()
	defer sub.Close()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	waitUntil(t, 5*time.Second, "first relist", func() bool { return p.Snapshot() != nil })
	before := p.Snapshot()
	require.Len(t, sub.Next().Events, 3)

	rt.Stop() // the socket file goes with the listener
	waitUntil(t, 5*time.Second, "relist fails", func() bool { _, err := p.LastError(); return err != nil })
	_, lastErr := p.LastError()
	assert.True(t, cri.IsUnavailable(lastErr), "classified as the runtime being away: %v", lastErr)
	// Let the gRPC channel back off for a while, as in a real outage.
	outage := time.Now()
	waitUntil(t, 10*time.Second, "several failed reconnects", func() bool { return time.Since(outage) > 2*time.Second })
	assert.Same(t, before, p.Snapshot(), "the last snapshot is kept")
	assert.Empty(t, sub.Next().Events, "an outage changes no pod")

	require.NoError(t, rt.Start(socket))
	back := time.Now()
	waitUntil(t, 10*time.Second, "relist succeeds again", func() bool { _, err := p.LastError(); return err == nil })
	t.Logf("reconnected %v after the runtime was back", time.Since(back).Round(time.Millisecond))
	assert.Empty(t, sub.Next().Events, "the same containers after the outage: nothing changed")
}
