package podconfig

import "fmt"

// ConfigError is a container config kubelet would not make: its message is
// kubelet's, and kubelet reports the container Waiting with reason
// CreateContainerConfigError (ErrCreateContainerConfig) and the message in
// a Failed event. Callers tell it from other failures with errors.As.
type ConfigError struct {
	Message string
	// Err is the error behind Message, when there is one, for errors.Is
	// and errors.As and the agent's log. Kubelet keeps some of it from the
	// pod's owner (a subPath's failure, which would name the host's
	// files): Message, not Err, is for the pod's status.
	Err error
}

func (e *ConfigError) Error() string { return e.Message }

// Unwrap returns the detail, so that errors.As finds its types too.
func (e *ConfigError) Unwrap() error { return e.Err }

// ReasonCreateContainerConfigError is the waiting reason kubelet reports
// for a ConfigError.
const ReasonCreateContainerConfigError = "CreateContainerConfigError"

func configErrorf(format string, args ...any) error {
	return &ConfigError{Message: fmt.Sprintf(format, args...)}
}
