package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/api"
)

// defaultListenRetry is how often a --listen address that could not be
// bound is tried again (kubelet retries its healthz server every 5 s).
const defaultListenRetry = 5 * time.Second

// apiListeners serves the state API on the sockets systemd passed
// (--web.systemd-socket: systemd binds them before any user can, and
// holds them across the agent's restarts) or on --listen's address.
// Whatever happens to the API, probing goes on: an address another
// process holds (a local user can bind 127.0.0.1:9440 while the agent
// restarts) is tried again every retry, said in the log and in
// cri_prober_api_up, and never stops the agent.
type apiListeners struct {
	server *api.Server
	config api.ServeConfig
	listen string // --listen; "" with systemd's sockets
	// systemd are the sockets systemd passed, when asked to use them.
	systemd []net.Listener
	// bound is --listen's address bound at start (nil if it could not
	// be: run tries again), so that the API is served before the agent
	// says it probes.
	bound   net.Listener
	bindErr error
	up      prometheus.Gauge
	// bind is api.Listen, and retry how long after a failed bind it is
	// tried again (tests change both).
	bind  func(string) (net.Listener, error)
	retry time.Duration
}

// newAPIListeners takes systemd's sockets now, when asked to (they are
// the process's from its start), and registers cri_prober_api_up.
func newAPIListeners(server *api.Server, config api.ServeConfig, listen string, useSystemd bool, retry time.Duration, reg prometheus.Registerer) (*apiListeners, error) {
	if retry <= 0 {
		retry = defaultListenRetry
	}
	l := &apiListeners{server: server, config: config, listen: listen, bind: api.Listen, retry: retry,
		up: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cri_prober_api_up",
			Help: "1 when the state API is served on every address it was given, 0 while an address could not be bound (it is tried again every 5 s)."})}
	if reg != nil {
		reg.MustRegister(l.up)
	}
	if !useSystemd {
		l.bound, l.bindErr = l.bind(listen)
		return l, nil
	}
	sockets, err := activation.Listeners()
	if err != nil {
		return nil, fmt.Errorf("--web.systemd-socket: the sockets systemd passed: %w", err)
	}
	for _, s := range sockets {
		if s != nil {
			l.systemd = append(l.systemd, s)
		}
	}
	if len(l.systemd) == 0 {
		return nil, errors.New("--web.systemd-socket: systemd passed no listening socket: start the agent through its socket unit (cri-prober.socket), or drop --web.systemd-socket and set --listen")
	}
	return l, nil
}

// addresses are what the API is served on, for the log.
func (l *apiListeners) addresses() []string {
	if len(l.systemd) == 0 {
		return []string{l.listen}
	}
	var out []string
	for _, s := range l.systemd {
		out = append(out, s.Addr().Network()+":"+s.Addr().String())
	}
	return out
}

// run serves until ctx is done.
func (l *apiListeners) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if len(l.systemd) > 0 {
		l.up.Set(1)
		var wg sync.WaitGroup
		for _, s := range l.systemd {
			wg.Go(func() { l.serve(ctx, s) })
		}
		wg.Wait()
		return
	}
	for first := true; ; first = false {
		s, err := l.bound, l.bindErr
		if !first {
			s, err = l.bind(l.listen)
		}
		if err == nil {
			l.up.Set(1)
			warnIfRemote(logger, s, l.config.WebConfigFile)
			l.serve(ctx, s)
			return
		}
		l.up.Set(0)
		logger.Error(err, "The state API cannot listen; probing and restarts go on without it, and the address is tried again",
			"listen", l.listen, "retry", l.retry, "hint", listenHint(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.retry):
		}
	}
}

func (l *apiListeners) serve(ctx context.Context, s net.Listener) {
	if err := l.server.Serve(ctx, s, l.config); err != nil {
		l.up.Set(0)
		klog.FromContext(ctx).Error(err, "State API stopped", "listen", s.Addr().String())
	}
}

// listenHint says what to do about a listen error.
func listenHint(err error) string {
	if errors.Is(err, os.ErrPermission) {
		return "the agent's user may not bind this address"
	}
	return "another process holds the address (find it with ss -ltnp); run the agent through its systemd socket unit (cri-prober.socket, --web.systemd-socket), which holds the address across the agent's restarts, or choose another --listen"
}

// warnIfRemote says when the API is reachable from other hosts without
// a web configuration.
func warnIfRemote(logger klog.Logger, s net.Listener, webConfigFile string) {
	if !isLocal(s.Addr()) && webConfigFile == "" {
		logger.Info("WARNING: the state API and metrics are reachable from other hosts; they show probe output and have no authentication (give them TLS and basic auth with --web.config.file)", "listen", s.Addr().String())
	}
}

// isLocal says whether only this node reaches addr: a loopback address
// or a unix socket.
func isLocal(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}
