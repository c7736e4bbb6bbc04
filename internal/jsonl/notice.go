package jsonl

import "strings"

// NoticePrefix starts a line a hook prints on stderr for the job's log
// even where its other stderr lines are not logged (a crawl page's hooks):
// a fetch the policy refused, a body cut at a size limit, links dropped
// over a cap. Anything a user would otherwise lose without a word.
const NoticePrefix = "archiveflow: "

// IsNotice reports whether a hook's stderr line is a notice.
func IsNotice(line string) bool { return strings.HasPrefix(line, NoticePrefix) }
