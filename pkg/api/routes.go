package api

import "net/url"

// The state API's routes, declared once: the server's mux patterns are
// made of them and the client's paths (Client) too, so that no command
// retypes one.
const (
	PathPods        = "/api/v1/pods"
	PathEvents      = "/api/v1/events"
	PathGates       = "/api/v1/gates"
	PathKills       = "/api/v1/kills"
	PathKillsPause  = PathKills + "/pause"
	PathKillsResume = PathKills + "/resume"
	// PathNode is what the agent keeps on the node (NodeReport).
	PathNode = "/api/v1/node"

	// The pod a namespace and name stand for (pods.View.ByName), and what
	// of it is served below it.
	routePod      = PathPods + "/{namespace}/{name}"
	routeReady    = routePod + "/" + podReady
	routeHistory  = routePod + "/" + podHistory
	routeRestarts = routePod + "/" + podRestarts
	routeGate     = routePod + "/" + podGates + "/{condition...}"

	podReady    = "ready"
	podHistory  = "history"
	podRestarts = "restarts"
	podGates    = "gates"
)

// PodPath is the path of pod namespace/name (routePod), and with what
// ("ready", "history", "restarts"; "": none), of that below it.
func PodPath(namespace, name, what string) string {
	p := PathPods + "/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
	if what != "" {
		p += "/" + what
	}
	return p
}

// GatePath is the path of condition on pod namespace/name (routeGate).
func GatePath(namespace, name, condition string) string {
	return PodPath(namespace, name, podGates) + "/" + url.PathEscape(condition)
}
