package agent

import (
	"github.com/cri-prober/cri-prober/pkg/cri"
	"github.com/cri-prober/cri-prober/pkg/logs"
	"github.com/cri-prober/cri-prober/pkg/pods"
)

// newContainerLogs makes the keeper of the log files of the containers
// the agent manages (kubelet's ContainerLogManager, over the pods' latest
// status), and gives pod sync the links of the instances it starts. Only
// with a pod sync: without one the agent creates no container.
func (a *Agent) newContainerLogs() (logs.Links, *logs.Manager, error) {
	cfg := a.cfg
	logsCfg := cfg.ContainerLogs
	if logsCfg.PodLogsDir == "" { // only the log files under it are acted on
		logsCfg.PodLogsDir = cfg.Node.Layout().PodLogsDir
	}
	links := logs.Links{Dir: logsCfg.LinkDir, Root: logsCfg.PodLogsDir, KeepFiles: logsCfg.Stub()}
	targets := func() []logs.Target {
		if st := a.Status(); st != nil {
			return logTargets(st.View)
		}
		return nil
	}
	m, err := logs.NewManager(cfg.Client, targets, logsCfg,
		logs.WithRegisterer(registerer(cfg.AgentRegistry)))
	return links, m, err
}

// logTargets are the running instances whose log files the agent keeps:
// every container of the pods it makes (static pods, orphans among them),
// and, in the pods others made, the instances it created to restart
// theirs (cri.AnnotationRestartOf). Another client's containers are never
// rotated: their creator keeps their logs.
func logTargets(v *pods.View) []logs.Target {
	var out []logs.Target
	for _, p := range v.Pods() {
		for _, c := range p.Containers {
			for _, inst := range c.Instances {
				if inst.State != cri.StateRunning || inst.LogPath == "" {
					continue
				}
				if p.Static || inst.Annotations[cri.AnnotationRestartOf] != "" {
					out = append(out, logs.Target{Namespace: p.Namespace, Pod: p.Name, PodUID: p.UID, Container: inst})
				}
			}
		}
	}
	return out
}
