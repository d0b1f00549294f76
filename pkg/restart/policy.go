package restart

// minimumGracePeriod is kubelet's floor on any kill's grace period.
const minimumGracePeriod = 2
