package webui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// browserNames are the Chromium-family executables Chromium looks for.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome"}

// Chromium returns the path of a Chromium-family browser on PATH.
func Chromium() (string, error) {
	for _, name := range browserNames {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no browser on PATH: looked for %s", strings.Join(browserNames, ", "))
}

// WorkflowsURL is the UI page listing namespace's workflows that match the
// visibility query, e.g. `ArchiveflowState="finished"`.
func WorkflowsURL(base, namespace, query string) string {
	return base + "/namespaces/" + neturl.PathEscape(namespace) + "/workflows?query=" + neturl.QueryEscape(query)
}

// HistoryURL is the UI page of one workflow run's Event History, every
// event on one page (the UI shows 100 by default).
func HistoryURL(base, namespace, workflowID, runID string) string {
	return base + "/namespaces/" + neturl.PathEscape(namespace) + "/workflows/" + neturl.PathEscape(workflowID) + "/" +
		neturl.PathEscape(runID) + "/history?per-page=500"
}

// MetadataURL is the UI page of one workflow run's User Metadata: its
// summary and its current details (archiveflow's details line: URL, state,
// step, title).
func MetadataURL(base, namespace, workflowID, runID string) string {
	return base + "/namespaces/" + neturl.PathEscape(namespace) + "/workflows/" + neturl.PathEscape(workflowID) + "/" +
		neturl.PathEscape(runID) + "/metadata"
}

var (
	styleOrScript = regexp.MustCompile(`(?s)<(style|script)[^>]*>.*?</(style|script)>`)
	tag           = regexp.MustCompile(`<[^>]+>`)
	space         = regexp.MustCompile(`\s+`)
)

// Text is what a page's DOM shows: its text, styles and scripts left
// out, white space folded to one space (the text of an Event History row
// reads e.g. "Activity Type RunHook Summary on_Snapshot__10_fetch.sh").
func Text(dom string) string {
	s := styleOrScript.ReplaceAllString(dom, " ")
	s = tag.ReplaceAllString(s, " ")
	return strings.TrimSpace(space.ReplaceAllString(s, " "))
}

// WorkflowLink is the path a workflow's row in a list links to; a page
// that contains it lists the workflow (the query box alone only echoes
// the query).
func WorkflowLink(namespace, workflowID string) string {
	return "/namespaces/" + namespace + "/workflows/" + workflowID + "/"
}

// DumpDOM loads url in the headless browser and returns the DOM after its
// scripts had up to 15 s of virtual time to render. The browser runs with
// a throwaway profile and without its sandbox (CI runs as root).
func DumpDOM(ctx context.Context, browser, url string) (string, error) {
	profile, err := os.MkdirTemp("", "archiveflow-webui-")
	if err != nil {
		return "", fmt.Errorf("browser profile: %w", err)
	}
	defer func() { _ = os.RemoveAll(profile) }()
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu",
		"--user-data-dir="+profile, "--virtual-time-budget=15000", "--dump-dom", url)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = errors.Join(err, ctx.Err())
		}
		return "", fmt.Errorf("%s --dump-dom %s: %w (stderr: %s)", browser, url, err, lastLine(stderr.String()))
	}
	return out.String(), nil
}

// WaitListed loads url in the browser every pollEvery until its DOM
// contains want (e.g. a WorkflowLink) and returns that DOM, or fails when
// ctx ends, with the last DOM's failure. Visibility is eventually
// consistent: a job just finished may take a moment to be listed.
func WaitListed(ctx context.Context, browser, url, want string, pollEvery time.Duration) (string, error) {
	var lastErr error
	for {
		load, cancel := context.WithTimeout(ctx, time.Minute)
		dom, err := DumpDOM(load, browser, url)
		cancel()
		if err == nil && strings.Contains(dom, want) {
			return dom, nil
		}
		lastErr = err
		if err == nil {
			lastErr = fmt.Errorf("the page does not contain %s", want)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("web UI %s: %w (last: %v)", url, ctx.Err(), lastErr)
		case <-time.After(pollEvery):
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
