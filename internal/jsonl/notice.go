package jsonl

import "strings"

// NoticePrefix starts a line a hook prints on stderr for the job's log
// even where its other stderr lines are not logged (a crawl page's hooks):
// a fetch the policy refused, a body cut at a size limit, links dropped
// over a cap. Anything a user would otherwise lose without a word.
const NoticePrefix = "archiveflow: "

// CutPrefix starts a notice that something was lost to a limit: a body
// cut short, links dropped over a cap. Besides the job's log, a crawl
// counts these lines (the job's cut_count) and keeps them in the page's
// note.
const CutPrefix = NoticePrefix + "cut: "

// IsNotice reports whether a hook's stderr line is a notice.
func IsNotice(line string) bool { return strings.HasPrefix(line, NoticePrefix) }

// IsCut reports whether a hook's stderr line is a notice of a loss to a
// limit (CutPrefix).
func IsCut(line string) bool { return strings.HasPrefix(line, CutPrefix) }

// CutText is a cut notice's message without its prefix.
func CutText(line string) string { return strings.TrimPrefix(line, CutPrefix) }
