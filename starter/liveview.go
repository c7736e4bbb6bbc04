package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// terminalSize reports the size of the terminal w writes to; ok is false
// when w is not a terminal (a file, a pipe) or TERM says it cannot redraw.
func terminalSize(w io.Writer) (width, height int, ok bool) {
	f, isFile := w.(*os.File)
	if !isFile || os.Getenv("TERM") == "dumb" || !term.IsTerminal(int(f.Fd())) {
		return 0, 0, false
	}
	width, height, err := term.GetSize(int(f.Fd()))
	if err != nil || width < 20 || height < 3 {
		return 0, 0, false
	}
	return width, height, true
}

// reporter shows waited-for jobs while they run and how each ended.
type reporter interface {
	// progress is called every poll interval with the jobs still running.
	progress(ctx context.Context, elapsed time.Duration)
	// finished shows how job i ended.
	finished(i int, o *outcome)
	// close leaves the console clean (no live view left on it).
	close()
}

// newReporter picks how waited-for jobs are shown: nothing during the run
// with --json (the result carries everything), a live view redrawn in
// place on a terminal, plain progress lines otherwise (or when logs share
// the console).
func (a *app) newReporter(inv *invocation, b *backend.Backend, jobs []submitted) reporter {
	if inv.json {
		return jsonReporter{}
	}
	base := textReporter{a: a, b: b, jobs: jobs, done: make([]bool, len(jobs))}
	if w, h, ok := a.terminal(); ok && !inv.logsOnConsole {
		return &liveReporter{textReporter: base, screen: screen{w: a.stdout}, width: w, height: h,
			rows: make([][]hookRow, len(jobs)), since: map[string]time.Time{}}
	}
	return &plainReporter{textReporter: base, last: make([]progress, len(jobs)), lastAt: make([]time.Duration, len(jobs))}
}

type jsonReporter struct{}

func (jsonReporter) progress(context.Context, time.Duration) {}
func (jsonReporter) finished(int, *outcome)                  {}
func (jsonReporter) close()                                  {}

// textReporter is what the plain and the live reporter share.
type textReporter struct {
	a    *app
	b    *backend.Backend
	jobs []submitted
	done []bool
}

// read returns job i's progress from Redis; ok is false on a transient
// error (the next poll tries again).
func (t *textReporter) read(ctx context.Context, i int) (progress, bool) {
	v, err := t.b.Store.GetJob(ctx, t.jobs[i].Ident)
	if err != nil {
		return progress{}, false
	}
	pr := progressOf(v)
	if v.FetchDepth == model.FetchInf {
		pr.Crawl = true
		c, err := jobCrawl(ctx, t.b, v)
		if err != nil {
			return progress{}, false
		}
		if c != nil { // nil: no frontier yet
			pr.PagesDone, pr.Pages, pr.Items = c.Pages.Done+c.Pages.Skipped, c.Total, c.ItemsDownloaded
		}
	}
	return pr, true
}

// plainEvery is the least time between two progress lines of a job.
const plainEvery = 2 * time.Second

// plainCrawlEvery is the least time between two progress lines of a
// crawl, whose pages move all the time.
const plainCrawlEvery = 10 * time.Second

// plainReporter prints a line when a job is in another step (a crawl: has
// other pages done) than in its last line, at most one every plainEvery
// (a crawl: plainCrawlEvery): a short job prints few lines.
type plainReporter struct {
	textReporter
	last   []progress
	lastAt []time.Duration
}

func (p *plainReporter) progress(ctx context.Context, elapsed time.Duration) {
	for i, j := range p.jobs {
		if p.done[i] {
			continue
		}
		printed, every := p.last[i].started(), plainEvery
		if p.last[i].Crawl {
			every = plainCrawlEvery
		}
		if printed && elapsed-p.lastAt[i] < every {
			continue
		}
		pr, ok := p.read(ctx, i)
		// Nothing to say before discovery (a crawl: its first page), nor
		// while in the same step (with the same pages done).
		if !ok || !pr.started() || printed && !pr.moved(p.last[i]) {
			continue
		}
		p.last[i], p.lastAt[i] = pr, elapsed
		fmt.Fprintf(p.a.stdout, "%s  %-8s %s  %s\n", j.Ident, pr.State, pr.line("  "), elapsed.Round(100*time.Millisecond))
	}
}

func (p *plainReporter) finished(i int, o *outcome) {
	p.done[i] = true
	p.a.printOutcome(o, 0)
}

func (p *plainReporter) close() {}

// maxDetailedJobs is how many running jobs the live view shows hook by
// hook; with more, each running job gets one line.
const maxDetailedJobs = 3

// liveQueryTimeout bounds one status query of the live view.
const liveQueryTimeout = 2 * time.Second

// liveReporter redraws a view of the running jobs in place: per job its
// state, step, hooks done, bytes and time, and (for a few jobs) each hook
// that finished or is running.
type liveReporter struct {
	textReporter
	screen        screen
	width, height int
	ticks         int
	rows          [][]hookRow
	// since is when the view first saw a hook running (ident/plugin/hook):
	// the status query has no start time for a running hook.
	since map[string]time.Time
}

func (l *liveReporter) progress(ctx context.Context, elapsed time.Duration) {
	l.ticks++
	if w, h, ok := l.a.terminal(); ok {
		l.width, l.height = w, h
	}
	running := 0
	for i := range l.jobs {
		if !l.done[i] {
			running++
		}
	}
	var views []runningJob
	for i, j := range l.jobs {
		if l.done[i] {
			continue
		}
		pr, ok := l.read(ctx, i)
		if !ok {
			continue
		}
		lj := runningJob{ident: j.Ident, url: j.URL, progress: pr, since: map[string]time.Duration{}}
		if running <= maxDetailedJobs && pr.Hooks > 0 { // no plan before discovery
			if st, err := queryStatus(ctx, l.b.Temporal, j.WorkflowID, j.RunID, liveQueryTimeout); err == nil {
				l.rows[i] = hookRows(st)
			}
			lj.rows = l.rows[i]
			now := l.a.now()
			for _, r := range lj.rows {
				if r.Phase != workflows.PhaseRunning {
					continue
				}
				k := j.Ident + "/" + r.key()
				if _, seen := l.since[k]; !seen {
					l.since[k] = now
				}
				lj.since[r.key()] = now.Sub(l.since[k])
			}
		}
		views = append(views, lj)
	}
	l.screen.draw(liveFrame(views, l.ticks, elapsed, l.height-1), l.width)
}

func (l *liveReporter) finished(i int, o *outcome) {
	l.done[i] = true
	l.screen.clear()
	l.a.printOutcome(o, l.width)
}

func (l *liveReporter) close() { l.screen.clear() }

// runningJob is one running job in the live view.
type runningJob struct {
	ident, url string
	progress   progress
	rows       []hookRow                // nil: one line only
	since      map[string]time.Duration // running hook key → running for
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// liveFrame renders the live view: for each job a line with its state,
// step, hooks done, bytes and the time waited, then (when its rows are
// known) a line per hook that finished or is running and a count of the
// pending ones. It returns at most maxLines lines.
func liveFrame(jobs []runningJob, tick int, elapsed time.Duration, maxLines int) []string {
	var lines []string
	spin := spinner[tick%len(spinner)]
	for _, j := range jobs {
		p := j.progress
		lines = append(lines, fmt.Sprintf("%s %s  %s · %s · %s  %s",
			spin, j.ident, p.State, p.line(" · "), elapsed.Round(100*time.Millisecond), j.url))
		if j.rows == nil {
			continue
		}
		names := hookNames(j.rows)
		pending := 0
		for i, r := range j.rows {
			switch r.Phase {
			case workflows.PhasePending:
				pending++
			case workflows.PhaseRunning:
				lines = append(lines, fmt.Sprintf("    ▸ %-12s running    %s", names[i], shortDuration(j.since[r.key()])))
			default:
				lines = append(lines, fmt.Sprintf("    %s %-12s %-10s %s  %s", statusMark(r.Status), names[i], r.Status,
					shortDuration(r.duration()), oneLine(r.detail())))
			}
		}
		if pending > 0 {
			lines = append(lines, fmt.Sprintf("    · %d pending", pending))
		}
	}
	if maxLines > 0 && len(lines) > maxLines {
		more := len(lines) - maxLines + 1
		lines = append(lines[:maxLines-1], fmt.Sprintf("  … %d more lines (enlarge the terminal)", more))
	}
	return lines
}

// statusMark is a finished hook's mark in the live view.
func statusMark(s model.Status) string {
	switch s {
	case model.StatusSucceeded:
		return "✓"
	case model.StatusFailed:
		return "✗"
	case model.StatusSkipped:
		return "-"
	}
	return "·"
}

// screen is a region at the bottom of a terminal that is redrawn in place
// with plain ANSI sequences: cursor up over the last frame, erase to the
// end of the screen, write the new frame. Lines are cut to the width so
// none wraps, which keeps the line count exact.
type screen struct {
	w     io.Writer
	drawn int // lines of the frame on screen
}

func (s *screen) draw(lines []string, width int) {
	var b strings.Builder
	s.erase(&b)
	for _, l := range lines {
		b.WriteString(fitLine(l, width-1))
		b.WriteString("\n")
	}
	_, _ = io.WriteString(s.w, b.String())
	s.drawn = len(lines)
}

// clear removes the frame; output continues where it began.
func (s *screen) clear() {
	if s.drawn == 0 {
		return
	}
	var b strings.Builder
	s.erase(&b)
	_, _ = io.WriteString(s.w, b.String())
	s.drawn = 0
}

func (s *screen) erase(b *strings.Builder) {
	if s.drawn > 0 {
		fmt.Fprintf(b, "\x1b[%dA", s.drawn)
	}
	b.WriteString("\r\x1b[J")
}
