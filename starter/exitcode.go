package main

import (
	"errors"
	"fmt"
)

// Exit codes: scripts may rely on them.
const (
	exitOK          = 0 // success
	exitJobFailed   = 1 // with --wait: a job ended failed or aborted
	exitUsage       = 2 // bad command line or bad input; nothing was done
	exitNotFound    = 3 // the job does not exist (never submitted or expired)
	exitConflict    = 4 // the job is already running / in a state that forbids the command
	exitUnavailable = 5 // Temporal or Redis cannot be reached
	exitStillActive = 6 // --wait stopped (interrupted, or --wait-timeout) before the jobs ended; they keep running
)

// cliError is an error with the exit code it maps to.
type cliError struct {
	code int
	err  error
}

func (e *cliError) Error() string { return e.err.Error() }
func (e *cliError) Unwrap() error { return e.err }

// withCode wraps err with an exit code (nil stays nil).
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &cliError{code: code, err: err}
}

// usageErr is a bad-input error: exit 2.
func usageErr(format string, args ...any) error {
	return &cliError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// exitCode returns the exit code err maps to: the innermost cliError's
// code, else 1.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ce *cliError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitJobFailed
}
