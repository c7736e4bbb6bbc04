// Package devtest runs the snapshot workflows on a real in-process Temporal
// dev server with real hooks (shell scripts) and the real process runner,
// and records the histories the replay tests in package workflows replay.
// Its tests link the whole Temporal server, so they only build with
// `-tags dev`:
//
//	go test -race -tags dev ./workflows/devtest/
//	ARCHIVEFLOW_RECORD_HISTORIES=1 go test -tags dev ./workflows/devtest/  # rewrite ../testdata/*.vN.json
//
// A recording is named TEST.vN.json after the SnapshotInput version that
// made it; the histories of earlier versions (TEST.json: version 0) stay and
// keep replaying.
package devtest
