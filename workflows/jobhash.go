package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/activities"
)

// jobHash writes a job's hash in Redis through the ordered writer: its
// step, state, settings, results and final state. It is chosen once, when
// the workflow starts (control.hash): a snapshot job owns its hash
// (ownHash); a crawl's start page (Job.CrawlPage) does not, the crawl does,
// so it writes its hooks' results only, without their fetch counters,
// which the crawl counts (pageHash); a crawl's final write also gives its
// frontier the job's retention (crawlHash).
type jobHash interface {
	step(in activities.StepInput)
	state(in activities.JobStateInput)
	// settings queues the settings write and returns its sequence number.
	settings(in activities.SettingsInput) int
	result(in activities.ResultInput)
	finish(in activities.FinishInput)
}

// snapshotHash is the job hash of a SnapshotWorkflow of job.
func snapshotHash(c *control, job activities.Job) jobHash {
	if job.CrawlPage {
		return pageHash{own: ownHash{c}}
	}
	return ownHash{c}
}

// ownHash is the job hash of a snapshot job.
type ownHash struct{ c *control }

func (h ownHash) step(in activities.StepInput) {
	h.c.write("set step", poolActs.SetStep, in)
}

func (h ownHash) state(in activities.JobStateInput) {
	h.c.write("set job state", poolActs.SetJobState, in)
}

func (h ownHash) settings(in activities.SettingsInput) int {
	return h.c.write("apply settings", poolActs.ApplySettings, in)
}

func (h ownHash) result(in activities.ResultInput) {
	h.c.write("record result", poolActs.RecordResult, in)
}

func (h ownHash) finish(in activities.FinishInput) {
	h.c.write("finish job", poolActs.FinishJob, in)
}

// crawlPageSettingsChange versions a crawl page's settings change: from
// it on, a snapshot in the crawl-page role (the crawl's start page, which
// the crawl signals its settings) writes nothing to the job hash.
const crawlPageSettingsChange = "crawl-page-settings-unwritten"

// pageHash is the job hash as a crawl's start page sees it: the crawl's.
type pageHash struct{ own ownHash }

func (pageHash) step(activities.StepInput)      {}
func (pageHash) state(activities.JobStateInput) {}
func (pageHash) finish(activities.FinishInput)  {}

func (p pageHash) result(in activities.ResultInput) {
	in.CrawlPage = true
	p.own.result(in)
}

// settings: the start page follows the crawl's settings (crawl.go
// applySettings), which the crawl wrote; histories from before
// crawlPageSettingsChange wrote them again.
func (p pageHash) settings(in activities.SettingsInput) int {
	if workflow.GetVersion(p.own.c.dctx, crawlPageSettingsChange, workflow.DefaultVersion, 1) == 1 {
		return p.own.c.writes.queued
	}
	return p.own.settings(in)
}

// crawlHash is a crawl's job hash.
type crawlHash struct{ ownHash }

func (h crawlHash) finish(in activities.FinishInput) {
	h.c.write("finish crawl", crawlActs.FinishCrawl, in)
}
