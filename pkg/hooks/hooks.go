// Package hooks tells the outside world when a container becomes ready,
// stops being ready or is restarted: a command run with the transition as
// JSON on its standard input, or a webhook POSTed the same JSON. Load
// balancers and alerting can follow containers without Kubernetes.
//
// It sits beside pkg/api at the top of the dependency order: it reads the
// events that carry a transition (events.Event.Transition).
package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/cri-prober/cri-prober/pkg/events"
)

// Transitions.
const (
	Ready     = string(events.TransitionReady)
	NotReady  = string(events.TransitionNotReady)
	Restarted = string(events.TransitionRestarted)
)

// Transition is the JSON a hook receives.
type Transition struct {
	Transition string    `json:"transition"` // ready, not-ready or restarted
	Time       time.Time `json:"time"`
	Namespace  string    `json:"namespace"`
	Pod        string    `json:"pod"`
	Container  string    `json:"container"`
	PodIP      string    `json:"podIP,omitempty"`
	Reason     string    `json:"reason"`  // the event's reason (ContainerReady, …)
	Message    string    `json:"message"` // the event's message
}

const (
	queueSize      = 1000
	webhookTimeout = 5 * time.Second
	commandTimeout = 10 * time.Second
	webhookTries   = 3
)

// Hooks delivers transitions, in order, on one goroutine (Run): Record
// never blocks the prober or the restarter; when deliveries fall behind by
// more than a thousand, new transitions are dropped and counted.
type Hooks struct {
	command []string // argv; nil: none
	webhook string   // URL; "": none
	podIP   func(namespace, pod string) string
	client  *http.Client
	backoff time.Duration

	queue      chan Transition
	deliveries *prometheus.CounterVec
}

// Option configures New.
type Option func(*Hooks)

// WithCommand runs argv for every transition, with the transition as JSON
// on its standard input and in CRI_PROBER_TRANSITION, CRI_PROBER_NAMESPACE,
// CRI_PROBER_POD and CRI_PROBER_CONTAINER.
func WithCommand(argv []string) Option { return func(h *Hooks) { h.command = argv } }

// WithWebhook POSTs every transition as JSON to url.
func WithWebhook(url string) Option { return func(h *Hooks) { h.webhook = url } }

// WithPodIP looks up a pod's IP for the transition's podIP.
func WithPodIP(f func(namespace, pod string) string) Option { return func(h *Hooks) { h.podIP = f } }

// WithRegisterer exports cri_prober_hook_deliveries_total to reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(h *Hooks) { reg.MustRegister(h.deliveries) }
}

// withRetryBackoff shortens the wait between webhook tries (tests).
func withRetryBackoff(d time.Duration) Option { return func(h *Hooks) { h.backoff = d } }

// New returns hooks for the given options; nil when none is set.
func New(opts ...Option) *Hooks {
	h := &Hooks{
		client:  &http.Client{Timeout: webhookTimeout},
		backoff: time.Second,
		queue:   make(chan Transition, queueSize),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cri_prober_hook_deliveries_total",
			Help: "Transitions given to the --on-transition command or the --webhook, by hook and result (ok, error, dropped).",
		}, []string{"hook", "result"}),
	}
	for _, opt := range opts {
		opt(h)
	}
	if h.command == nil && h.webhook == "" {
		return nil
	}
	return h
}

// Record takes the events that are transitions. It never blocks.
func (h *Hooks) Record(e events.Event) {
	if e.Transition == "" || e.Container == "" {
		return
	}
	t := Transition{Transition: string(e.Transition), Time: e.Time, Namespace: e.Namespace, Pod: e.Pod, Container: e.Container, Reason: e.Reason, Message: e.Message}
	if h.podIP != nil {
		t.PodIP = h.podIP(e.Namespace, e.Pod)
	}
	select {
	case h.queue <- t:
	default:
		for _, hook := range h.names() {
			h.deliveries.WithLabelValues(hook, "dropped").Inc()
		}
	}
}

func (h *Hooks) names() []string {
	var out []string
	if h.command != nil {
		out = append(out, "command")
	}
	if h.webhook != "" {
		out = append(out, "webhook")
	}
	return out
}

// Run delivers transitions until ctx is done.
func (h *Hooks) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case t := <-h.queue:
			body, err := json.Marshal(t)
			if err != nil {
				logger.Error(err, "Cannot encode a transition", "transition", t.Transition)
				continue
			}
			var wg sync.WaitGroup
			if h.command != nil {
				wg.Go(func() { h.deliver(logger, "command", t, func() error { return h.runCommand(ctx, t, body) }) })
			}
			if h.webhook != "" {
				wg.Go(func() { h.deliver(logger, "webhook", t, func() error { return h.post(ctx, body) }) })
			}
			wg.Wait()
		}
	}
}

func (h *Hooks) deliver(logger klog.Logger, hook string, t Transition, send func() error) {
	if err := send(); err != nil {
		h.deliveries.WithLabelValues(hook, "error").Inc()
		logger.Error(err, "Transition hook failed", "hook", hook, "transition", t.Transition, "pod", klog.KRef(t.Namespace, t.Pod), "container", t.Container)
		return
	}
	h.deliveries.WithLabelValues(hook, "ok").Inc()
}

func (h *Hooks) runCommand(ctx context.Context, t Transition, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.command[0], h.command[1:]...)
	cmd.Stdin = bytes.NewReader(body)
	cmd.Env = append(os.Environ(),
		"CRI_PROBER_TRANSITION="+t.Transition, "CRI_PROBER_NAMESPACE="+t.Namespace,
		"CRI_PROBER_POD="+t.Pod, "CRI_PROBER_CONTAINER="+t.Container)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("--on-transition %s: %w: %s", h.command[0], err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// post sends body, trying again after a network error or a 5xx.
func (h *Hooks) post(ctx context.Context, body []byte) error {
	var err error
	for try := range webhookTries {
		if try > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(h.backoff << (try - 1)):
			}
		}
		var retry bool
		if retry, err = h.postOnce(ctx, body); !retry {
			return err
		}
	}
	return err
}

func (h *Hooks) postOnce(ctx context.Context, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.webhook, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("--webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return !errors.Is(err, context.Canceled), fmt.Errorf("--webhook: %w", err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 500:
		return true, fmt.Errorf("--webhook %s answered %s", h.webhook, resp.Status)
	case resp.StatusCode >= 300:
		return false, fmt.Errorf("--webhook %s answered %s", h.webhook, resp.Status)
	}
	return false, nil
}
