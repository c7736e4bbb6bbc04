package model

// Response is one HTTP fetch reported by a hook with a `Response` JSONL record.
type Response struct {
	URL    string `json:"url"`
	Status int    `json:"status"` // HTTP status; 0 = no response (network error)
	Bytes  int64  `json:"bytes"`
	// WgetCode is the fetcher's own result code when it has one (ArchiveBot's
	// `wget_code` field, e.g. "RETRFINISHED" or "NETWORK_ERROR").
	WgetCode string `json:"wget_code,omitempty"`
	// Requisite marks a fetch of something the page needs (a stylesheet,
	// an image, a font): a crawl counts each requisite URL once, however
	// many pages, hosts or restarts fetch it (activities.PageTally).
	Requisite bool `json:"requisite,omitempty"`
	// Reused marks a requisite the page did not fetch: its crawl fetched it
	// before on this host (pagefetch's requisite memory), and the record
	// repeats that fetch's answer. It counts as the requisite (once per
	// crawl), so the count does not depend on the earlier fetch's page
	// attempt having been recorded; it is no download of this page, so the
	// job's log leaves it out.
	Reused bool `json:"reused,omitempty"`
}

// FetcherCode is ArchiveBot's wget_code of the fetch: the fetcher's own
// code, "OK" for a response without one, and "NETWORK_ERROR" for no
// response at all.
func (r Response) FetcherCode() string {
	switch {
	case r.WgetCode != "":
		return r.WgetCode
	case r.Status > 0:
		return "OK"
	default:
		return "NETWORK_ERROR"
	}
}

// IsError is ArchiveBot's error rule as its Redis layout states it for
// error_count ("4xx, 5xx"): a 4xx or 5xx answer, no response, or a fetcher
// code other than success ("OK"; wget's "RETRFINISHED" is success too).
// ArchiveBot's pipeline leaves 4xx out of a download packet's is_error
// (only is_warning), so its log analyzer's error_count would miss them;
// archiveflow's packets carry this rule, so the analyzer, the dashboard and
// the job's counters agree (docs/redis-layout.md, "Counters").
func (r Response) IsError() bool {
	code := r.FetcherCode()
	return r.Status >= 400 || r.Status == 0 || (code != "OK" && code != "RETRFINISHED")
}

// IsWarning follows ArchiveBot's pipeline (is_warning): a 4xx response.
func (r Response) IsWarning() bool { return r.Status >= 400 && r.Status < 500 }

// TransientStatus is the one rule for what a page's own HTTP answer says
// about the attempt that fetched it: a 5xx, 408 (Request Timeout) or 429
// (Too Many Requests) is the site unable to answer now, so the attempt is
// transient and tried again (its retry policy; then, for a foreground
// hook or a crawl page, hooks.retry_later); any other answer is the
// page's own and final. The answer is archived
// either way: it is what the origin sent.
func TransientStatus(status int) bool {
	return (status >= 500 && status < 600) || status == 408 || status == 429
}

// ResponseClass is ArchiveBot's bucket of a response status: 1..5 for
// 1xx..5xx, 0 for anything else (runk: no response, or outside 100..599).
func ResponseClass(status int) int {
	if status < 100 || status >= 600 {
		return 0
	}
	return status / 100
}

// ResponseCounts summarises the Response records of one hook run: how many,
// by status class (ResponseClass; anything outside 100..599 is Runk) and
// how many were errors, as ArchiveBot's counters r1xx..r5xx, runk and
// error_count count them. It travels in the ArchiveResult so the workflow
// can write the counters itself, with retries, whatever happens to the
// hook's worker.
type ResponseCounts struct {
	Count int64 `json:"count"`
	R1xx  int64 `json:"r1xx,omitempty"`
	R2xx  int64 `json:"r2xx,omitempty"`
	R3xx  int64 `json:"r3xx,omitempty"`
	R4xx  int64 `json:"r4xx,omitempty"`
	R5xx  int64 `json:"r5xx,omitempty"`
	Runk  int64 `json:"runk,omitempty"`
	// Errors counts responses that ArchiveBot marks is_error.
	Errors int64 `json:"errors,omitempty"`
	// Bytes are the bytes fetched (Response.Bytes summed): the job's
	// bytes_downloaded. Absent from results recorded before it existed.
	Bytes int64 `json:"bytes,omitempty"`
}

// Downloaded is ArchiveBot's items_downloaded of these responses: the 2xx
// and 3xx answers. One rule for every job: a snapshot's results
// (rkeys.Store.RecordResult) and a crawl's pages (jobstore's counters).
func (c ResponseCounts) Downloaded() int64 { return c.R2xx + c.R3xx }

// Add counts one response in its class, and as an error when it is one.
func (c *ResponseCounts) Add(r Response) {
	c.Count++
	c.Bytes += r.Bytes
	switch ResponseClass(r.Status) {
	case 1:
		c.R1xx++
	case 2:
		c.R2xx++
	case 3:
		c.R3xx++
	case 4:
		c.R4xx++
	case 5:
		c.R5xx++
	default:
		c.Runk++
	}
	if r.IsError() {
		c.Errors++
	}
}

// WithCount returns c with Count set from its classes, in which Add puts
// every response exactly once: for counts read back from a job hash,
// which keeps the classes (ArchiveBot's r1xx..r5xx, runk) and no total.
func (c ResponseCounts) WithCount() ResponseCounts {
	c.Count = c.R1xx + c.R2xx + c.R3xx + c.R4xx + c.R5xx + c.Runk
	return c
}

// CountResponses buckets responses the way ArchiveBot's log analyzer does.
func CountResponses(rs []Response) ResponseCounts {
	var c ResponseCounts
	for _, r := range rs {
		c.Add(r)
	}
	return c
}
