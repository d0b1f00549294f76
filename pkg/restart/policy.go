package restart

// MinimumGracePeriod is kubelet's floor on any kill's grace period, in
// seconds: what StopContainer gets at least.
const MinimumGracePeriod = 2
