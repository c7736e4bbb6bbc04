package activities

import (
	"fmt"
	"strings"

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

// attemptFailure is the message of a hook attempt's failure: it names the
// hook and the attempt (the Web UI shows it on the activity), then why.
func attemptFailure(key string, attempt int, why string) string {
	return fmt.Sprintf("hook %s attempt %d: %s", key, attempt, why)
}

// ErrorDetail is a hook result's error without the "hook KEY attempt N: "
// (or "hook KEY: ") its failure message starts with: the words to show
// beside a hook's name and attempts, as status's table does.
func ErrorDetail(key, msg string) string {
	rest, ok := strings.CutPrefix(msg, "hook "+key)
	if !ok {
		return msg
	}
	if why, ok := strings.CutPrefix(rest, ": "); ok {
		return why
	}
	n, why, ok := strings.Cut(strings.TrimPrefix(rest, " attempt "), ": ")
	if !ok || !strings.HasPrefix(rest, " attempt ") || n == "" || strings.Trim(n, "0123456789") != "" {
		return msg
	}
	return why
}
