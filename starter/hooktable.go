package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/builtin/chrome"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// hookRow is one hook of a job as the results table and --json show it:
// what the workflow's status (Status.Hooks, one model.ArchiveResult per
// finished hook) says about it.
type hookRow struct {
	Step       int                 `json:"step"`
	Plugin     string              `json:"plugin"`
	Hook       string              `json:"hook"` // the hook's file name
	Background bool                `json:"background,omitempty"`
	Phase      workflows.HookPhase `json:"phase"` // pending, running, done
	Status     model.Status        `json:"status,omitempty"`
	Attempts   int                 `json:"attempts,omitempty"`
	DurationMS int64               `json:"duration_ms,omitempty"`
	Bytes      int64               `json:"output_bytes,omitempty"`
	Output     string              `json:"output,omitempty"`
	Error      string              `json:"error,omitempty"`
	// Reason is why a skipped hook was skipped, in the hook's words.
	Reason string `json:"reason,omitempty"`
	// RetryAt is when a hook waiting for a later retry runs again.
	RetryAt *time.Time `json:"retry_at,omitempty"`
}

// key identifies the hook within its job.
func (r hookRow) key() string { return r.Plugin + "/" + r.Hook }

// duration is how long the finished hook ran (all attempts).
func (r hookRow) duration() time.Duration { return time.Duration(r.DurationMS) * time.Millisecond }

// phaseNotRun is a hook of an ended job that has no result: the job
// ended (aborted, failed) before the hook started or while it ran.
const phaseNotRun workflows.HookPhase = "not_run"

// hookRows turns the workflow's per-hook status into rows, in plan order.
func hookRows(st workflows.Status) []hookRow {
	rows := make([]hookRow, 0, len(st.Hooks))
	for _, h := range st.Hooks {
		r := hookRow{Step: h.Step, Plugin: h.Plugin, Hook: h.Hook, Background: h.Background, Phase: h.Phase}
		if res := h.Result; res != nil {
			r = resultRow(*res)
			r.Step, r.Plugin, r.Hook, r.Background, r.Phase = h.Step, h.Plugin, h.Hook, h.Background, h.Phase
		} else if st.State.Final() {
			// Not pending nor running any more: the job ended first (an
			// attempt it stopped has no result either).
			r.Phase, r.Reason = phaseNotRun, fmt.Sprintf("no result: the job ended %s before the hook finished", st.State)
		}
		rows = append(rows, r)
	}
	return rows
}

// resultRow is a final result as a table row.
func resultRow(res model.ArchiveResult) hookRow {
	r := hookRow{Step: res.Step, Plugin: res.Plugin, Hook: res.Hook, Background: res.Background, Phase: workflows.PhaseDone,
		Status: res.Status, Attempts: res.Attempts, Bytes: res.OutputBytes, Output: res.OutputStr, Error: res.Error, RetryAt: res.RetryAt}
	if !res.StartedAt.IsZero() && res.EndedAt.After(res.StartedAt) {
		r.DurationMS = res.EndedAt.Sub(res.StartedAt).Milliseconds()
	}
	if res.Status == model.StatusSkipped {
		r.Reason = res.OutputStr
	}
	return r
}

// hookHints are what the user can do about skipped hooks: for the
// built-in browser hooks skipped without Chromium, how to enable them.
func hookHints(rows []hookRow) []string {
	var browser []string
	for _, r := range rows {
		if r.Status == model.StatusSkipped && chrome.Missing(r.Reason) && !slices.Contains(browser, r.Plugin) {
			browser = append(browser, r.Plugin)
		}
	}
	if len(browser) == 0 {
		return nil
	}
	return []string{chrome.EnableHint(browser)}
}

// hookNames gives each row its name in the table: the plugin, or
// plugin/STEM when the plugin has more than one hook.
func hookNames(rows []hookRow) []string {
	count := map[string]int{}
	for _, r := range rows {
		count[r.Plugin]++
	}
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Plugin
		if count[r.Plugin] > 1 {
			names[i] += "/" + strings.TrimSuffix(r.Hook, filepath.Ext(r.Hook))
		}
	}
	return names
}

// detail is the row's last column: the error of a failed hook, the reason
// of a skipped one, else its output.
func (r hookRow) detail() string {
	switch {
	case r.Error != "":
		return activities.ErrorDetail(r.key(), r.Error)
	case r.Reason != "":
		return r.Reason
	}
	return r.Output
}

// waitingWords is how a hook or a crawl page waiting for a later retry
// due at shows: waiting (retry at …).
func waitingWords(at time.Time) string {
	return "waiting (retry at " + at.Local().Format(time.DateTime) + ")"
}

// jobState is a job's state as status (long) and list show it: for a
// running job whose hash has retry_at (rkeys.JobView.RetryAt: a snapshot
// whose hooks, or a crawl whose only remaining pages, wait for a later
// retry) waiting, long: waiting (retry at …); else its state.
func jobState(state model.JobState, retryAt *time.Time, long bool) string {
	switch {
	case retryAt == nil || state.Final():
		return string(state)
	case long:
		return waitingWords(*retryAt)
	}
	return string(workflows.StateWaiting)
}

// state is the row's status column: waiting (retry at …) for a hook
// waiting for a later retry, the final status, else the phase.
func (r hookRow) state() string {
	if r.RetryAt != nil {
		return waitingWords(*r.RetryAt)
	}
	switch {
	case r.Status != "":
		return string(r.Status)
	case r.Phase == phaseNotRun:
		return "not run"
	}
	return string(r.Phase)
}

// plainTableWidth bounds table lines when the output is not a terminal.
const plainTableWidth = 160

// writeHookTable prints rows as an aligned table (step, hook, status,
// attempts, duration, output or error) and the hints below it. Lines are
// cut at width characters.
func writeHookTable(w io.Writer, rows []hookRow, hints []string, width int) {
	if width <= 0 {
		width = plainTableWidth
	}
	names := hookNames(rows)
	head := []string{"STEP", "HOOK", "STATUS", "TRIES", "TIME"}
	cells := make([][]string, len(rows))
	widths := make([]int, len(head))
	for i, h := range head {
		widths[i] = len(h)
	}
	for i, r := range rows {
		tries, took := "", ""
		if r.Attempts > 0 {
			tries = strconv.Itoa(r.Attempts)
		}
		if r.Phase == workflows.PhaseDone {
			took = shortDuration(r.duration())
		}
		cells[i] = []string{strconv.Itoa(r.Step), names[i], r.state(), tries, took}
		for c, v := range cells[i] {
			widths[c] = max(widths[c], utf8.RuneCountInString(v))
		}
	}
	line := func(cols []string, last string) {
		var b strings.Builder
		for c, v := range cols {
			fmt.Fprintf(&b, "  %-*s", widths[c], v)
		}
		b.WriteString("  ")
		b.WriteString(last)
		fmt.Fprintln(w, fitLine(strings.TrimRight(b.String(), " "), width))
	}
	line(head, "OUTPUT / ERROR")
	for i, r := range rows {
		line(cells[i], oneLine(r.detail()))
	}
	for _, h := range hints {
		fmt.Fprintln(w, fitLine("  hint: "+h, width))
	}
}

// shortDuration renders d for a table: 0.3s, 12.4s, 2m05s.
func shortDuration(d time.Duration) string {
	if d < time.Minute {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// oneLine makes text from a hook safe and flat for one terminal line:
// whitespace runs become one space and control characters (escape
// sequences a hook printed) are dropped.
func oneLine(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = true
			continue
		case unicode.IsControl(r) || r == utf8.RuneError:
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// fitLine cuts s to width characters, marking the cut with "…".
func fitLine(s string, width int) string {
	if width <= 0 || utf8.RuneCountInString(s) <= width {
		return s
	}
	runes := []rune(s)
	return string(runes[:width-1]) + "…"
}
