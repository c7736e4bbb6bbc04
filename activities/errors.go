package activities

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// invalidInput is a non-retryable error for input that breaks a rule.
func invalidInput(format string, args ...any) error {
	return nonRetryable(ErrTypeInvalidInput, format, args...)
}

// nonRetryable is a non-retryable error of the given type.
func nonRetryable(errType, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), errType, nil)
}
