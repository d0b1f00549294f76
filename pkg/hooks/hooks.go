// Package hooks tells the outside world when a container becomes ready,
// stops being ready or is restarted: a command run with the transition as
// JSON on its standard input, or a webhook POSTed the same JSON. Load
// balancers and alerting can follow containers without Kubernetes.
//
// # Delivery
//
// Record never blocks the prober or the restarter. The command and the
// webhook each have their own queue and their own deliveries: neither ever
// waits for the other.
//
//   - In order per container: a hook receives the transitions of one
//     container (namespace, pod, container name) one at a time, in the
//     order they happened; the next one starts when the one before has
//     ended (delivered, failed, or cut at its timeout). A not-ready never
//     overtakes a later ready. There is no order between containers: use
//     the transition's time.
//   - In parallel across containers: at most 4 deliveries at once per
//     hook, each of a different container, so one slow delivery does not
//     hold up the others' (until all 4 are slow).
//   - Coalesced per container: while transitions wait, a container keeps
//     only its latest readiness result (ready or not-ready) and its latest
//     restart, in the order they came; an older one of the same kind is
//     superseded, never delivered, and counted in
//     cri_prober_hook_deliveries_total{result="coalesced"}. A receiver may
//     miss the flaps on the way, never a container's latest state, and
//     never sees two out of order, whatever other containers do. A restart
//     and a readiness result never supersede each other: a restart says
//     the container was replaced (its readiness starts over), which no
//     readiness result says.
//   - Containers take turns: in the order they began to wait, and one
//     with a transition still waiting after its turn goes to the back, so
//     a flapping container holds up no other.
//   - Bounded by the containers: at most 2 transitions wait per container.
//     When 1000 containers wait, the waiting transitions of those whose
//     pod is gone (WithPodExists) are dropped, counted in
//     cri_prober_hook_deliveries_total{result="dropped"} and logged; the
//     next look comes when twice as many wait as were left. A container
//     whose pod exists never loses its latest state, and what waits is
//     bounded by the node's pods: at most 1000 containers, or twice as
//     many as were left at the last look.
//   - When Run's context ends (the agent shuts down), waiting transitions
//     are not delivered and deliveries in flight are cut short (a command's
//     process group is killed); Run returns when they have ended.
//
// # The command
//
// The command runs in a process group of its own with the transition as
// JSON on its standard input and in its environment (WithCommand). If it
// has not exited after 10 s, or when the agent shuts down, the whole group
// is killed (SIGKILL). When it exits, whatever it left running in its group
// is killed too: no process of a hook outlives it. A process that leaves
// the group (setsid) escapes the kill, but cannot hold the delivery: 1 s
// after the command has ended, its standard error is closed whoever still
// holds it.
// A delivery fails on a non-zero exit or a timeout; the first 10 KiB of
// standard error are logged with the failure.
//
// # The webhook
//
// The transition is POSTed as application/json with 5 s per try, and tried
// 3 times in all (1 s, then 2 s apart) after a network error or a 5xx; any
// other answer outside 2xx fails at once. Redirects are not followed at
// all, to the same host or another: a 3xx is a failure that names where it
// pointed. At most 64 KiB of an answer is read; a failure quotes its first
// 512 bytes. The URL is logged and put in errors as scheme://host/path
// only (RedactURL): its user, password, query and fragment never reach a
// log line or an error, including net/http's errors, which quote the URL.
// A secret in the path itself would be shown: carry it in the userinfo or
// the query.
//
// What came from a workload (pod names, messages) is sent as it is, in the
// JSON; log lines carry it as klog key/values, never inside the message.
//
// It sits beside pkg/api at the top of the dependency order: it reads the
// events that carry a transition (events.Event.Transition).
package hooks

import (
	"context"
	"net/http"
	"strconv"
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
	// maxWaiting is how many containers may wait for each hook before the
	// transitions of those whose pod is gone are dropped.
	maxWaiting = 1000
	// maxInFlight is how many transitions each hook delivers at once at
	// most, each of a different container.
	maxInFlight = 4
)

// Hooks delivers transitions (see the package doc): Record queues, Run
// delivers.
type Hooks struct {
	command        []string // argv; nil: none
	webhook        string   // URL; "": none
	webhookShown   string   // webhook as logs show it (RedactURL)
	podIP          func(namespace, pod string) string
	podExists      func(namespace, pod string) bool
	client         *http.Client
	backoff        time.Duration
	commandTimeout time.Duration
	waitDelay      time.Duration

	queues     []*queue
	deliveries *prometheus.CounterVec
	inFlight   *prometheus.GaugeVec
	waiting    *prometheus.GaugeVec
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

// WithPodExists says whether a pod is still there: when too many
// containers wait, those of gone pods are dropped (see the package doc).
// It is called with a queue's lock held: it must be quick and must not
// record events. Without it, no pod is taken for gone.
func WithPodExists(f func(namespace, pod string) bool) Option {
	return func(h *Hooks) { h.podExists = f }
}

// WithRegisterer exports cri_prober_hook_deliveries_total,
// cri_prober_hook_in_flight and cri_prober_hook_waiting to reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(h *Hooks) { reg.MustRegister(h.deliveries, h.inFlight, h.waiting) }
}

// withRetryBackoff shortens the wait between webhook tries (tests).
func withRetryBackoff(d time.Duration) Option { return func(h *Hooks) { h.backoff = d } }

// withCommandTimeout shortens the command's timeout (tests).
func withCommandTimeout(d time.Duration) Option { return func(h *Hooks) { h.commandTimeout = d } }

// New returns hooks for the given options; nil when none is set.
func New(opts ...Option) *Hooks {
	h := &Hooks{
		backoff:        time.Second,
		commandTimeout: commandTimeout,
		waitDelay:      commandWaitDelay,
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cri_prober_hook_deliveries_total",
			Help: "Transitions given to the --on-transition command or the --webhook, by hook and result (ok, error, coalesced: superseded by a newer one of its container before its delivery, dropped: its pod gone when " + strconv.Itoa(maxWaiting) + " containers wait).",
		}, []string{"hook", "result"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cri_prober_hook_in_flight",
			Help: "Transitions being delivered now, by hook (at most " + strconv.Itoa(maxInFlight) + " per hook).",
		}, []string{"hook"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cri_prober_hook_waiting",
			Help: "Transitions waiting for their delivery, by hook (at most 2 per container: its latest readiness result and its latest restart).",
		}, []string{"hook"}),
	}
	for _, opt := range opts {
		opt(h)
	}
	if len(h.command) == 0 && h.webhook == "" {
		return nil
	}
	if len(h.command) > 0 {
		h.queues = append(h.queues, h.newQueue("command", h.runCommand))
	}
	if h.webhook != "" {
		h.webhookShown = RedactURL(h.webhook)
		h.client = newWebhookClient()
		h.queues = append(h.queues, h.newQueue("webhook", h.post))
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
	for _, q := range h.queues {
		q.push(t)
	}
}

// Run delivers transitions until ctx is done, then returns once the
// deliveries in flight have ended.
func (h *Hooks) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	var wg sync.WaitGroup
	for _, q := range h.queues {
		context.AfterFunc(ctx, q.stop)
		for range maxInFlight {
			wg.Go(func() { q.work(ctx, logger) })
		}
	}
	wg.Wait()
}
