// Package procs owns the supervision of hook processes: it starts one hook
// attempt in its own process group with stdout and stderr going to
// per-attempt files, tails and parses those files live with bounded memory,
// enforces the timeout (SIGTERM to the group, grace, SIGKILL), makes sure
// nothing the hook started outlives it (process group and an environment
// marker for escaped daemons), maps the outcome to a final status or a
// transient failure, and sweeps leftovers of crashed runners from their
// .pid files. A hook process that watches a program it started finds
// here the memory limit it runs under (OwnMemoryLimit) and that program's
// processes (Tree).
//
// It knows nothing of Temporal, Redis or configuration files: callers pass
// plain values in a Spec. Linux only (it reads /proc).
package procs
