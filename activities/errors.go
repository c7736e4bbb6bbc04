package activities

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// invalidInput is a non-retryable error for input that breaks a rule.
func invalidInput(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return temporal.NewNonRetryableApplicationError(msg, ErrTypeInvalidInput, nil)
}

// nonRetryable is a non-retryable error of the given type.
func nonRetryable(errType, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), errType, nil)
}

// configError is a non-retryable plugin configuration error.
func configError(err error, details ...any) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeConfig, nil, details...)
}

// temporalError is a retryable ApplicationError of the given type.
func temporalError(errType string, err error, details ...any) error {
	return temporal.NewApplicationError(err.Error(), errType, details...)
}
