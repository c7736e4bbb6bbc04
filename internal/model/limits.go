package model

import (
	"fmt"
	"time"

	"github.com/archiveflow/archiveflow/internal/bytesize"
)

// The words a crawl that reached a limit finishes with (the job hash's
// limit field, `starter status`, the crawl's status). Settings' MaxPages,
// MaxBytes and MaxDuration are the limits.

// PageLimitReached names a page limit of n pages reached.
func PageLimitReached(n int64) string { return fmt.Sprintf("page limit %d reached", n) }

// ByteLimitReached names a byte limit reached with got bytes downloaded.
func ByteLimitReached(limit, got int64) string {
	return fmt.Sprintf("byte limit %s reached (%s downloaded)", bytesize.Format(limit), bytesize.Format(got))
}

// DurationLimitReached names a duration limit reached.
func DurationLimitReached(d time.Duration) string {
	return fmt.Sprintf("duration limit %s reached", d)
}
