//go:build !dev

package main

import (
	"context"
	"errors"
)

// devCommand without the dev build tag: the embedded stack links the whole
// Temporal server, which stays out of the normal starter build.
func devCommand() *command {
	return &command{
		name:     "dev",
		args:     "[URL...]",
		summary:  "run the embedded stack (needs: go run -tags dev ./starter dev)",
		noConfig: true,
		run: func(context.Context, *app, *invocation) error {
			return withCode(exitUsage, errors.New("this starter was built without the embedded stack: run it with `go run -tags dev ./starter dev [URL...]` (the dev build links an in-process Temporal server)"))
		},
	}
}

// dispatchHook: only the dev build runs workers, and so built-in hooks.
func dispatchHook([]string) (int, bool) { return 0, false }
