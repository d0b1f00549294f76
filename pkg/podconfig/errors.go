package podconfig

import "fmt"

// ConfigError is a container config kubelet would not make: its message is
// kubelet's, and kubelet reports the container Waiting with reason
// CreateContainerConfigError (ErrCreateContainerConfig) and the message in
// a Failed event. Callers tell it from other failures with errors.As.
type ConfigError struct {
	Message string
}

func (e *ConfigError) Error() string { return e.Message }

// ReasonCreateContainerConfigError is the waiting reason kubelet reports
// for a ConfigError.
const ReasonCreateContainerConfigError = "CreateContainerConfigError"

func configErrorf(format string, args ...any) error {
	return &ConfigError{Message: fmt.Sprintf(format, args...)}
}
