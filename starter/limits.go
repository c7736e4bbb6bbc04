package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/archiveflow/archiveflow/internal/bytesize"
	"github.com/archiveflow/archiveflow/internal/model"
)

// A crawl's limits on the command line: submit's and retry --continue's
// --max-pages, --max-bytes, --max-duration, and set's max_pages=,
// max_bytes=, max_duration= (model.Settings MaxPages, MaxBytes,
// MaxDuration; docs/crawls.md "Limits").

// limitsHelp is the flags' and keys' shared description.
const limitsHelp = `A crawl's limits (0 = none) end it cleanly, state finished with the
limit named ("finished (crawl): page limit 100 reached" in starter
status), its unfetched pages kept for starter retry IDENT --continue:
--max-pages N counts pages fetched as pages (requisites not counted) and is
exact; --max-bytes SIZE (512MiB, 2GB) counts bytes_downloaded and
--max-duration DUR (90m, 2h) the time since the crawl started: both stop
new pages, so the pages in flight may pass them.`

// addLimitFlags registers the limit flags.
func addLimitFlags(fs *pflag.FlagSet) {
	fs.Int64("max-pages", 0, "a crawl: stop after this many pages (exact; requisites not counted; 0 = no limit)")
	fs.String("max-bytes", "", "a crawl: stop claiming pages once this much is downloaded (512MiB, 2GB; 0 = no limit)")
	fs.Duration("max-duration", 0, "a crawl: stop claiming pages this long after it started (90m, 2h; 0 = no limit)")
}

// anyLimitFlag reports whether a limit flag was given.
func anyLimitFlag(fs *pflag.FlagSet) bool {
	return fs.Changed("max-pages") || fs.Changed("max-bytes") || fs.Changed("max-duration")
}

// applyLimitFlags sets the given limit flags on s, reporting every bad one.
func applyLimitFlags(fs *pflag.FlagSet, s *model.Settings) []error {
	var errs []error
	if fs.Changed("max-pages") {
		n, _ := fs.GetInt64("max-pages")
		if err := setLimit(s, "max_pages", strconv.FormatInt(n, 10)); err != nil {
			errs = append(errs, fmt.Errorf("--max-pages %d: %w", n, err))
		}
	}
	if fs.Changed("max-bytes") {
		v, _ := fs.GetString("max-bytes")
		if err := setLimit(s, "max_bytes", v); err != nil {
			errs = append(errs, fmt.Errorf("--max-bytes %s: %w", v, err))
		}
	}
	if fs.Changed("max-duration") {
		d, _ := fs.GetDuration("max-duration")
		if err := setLimit(s, "max_duration", d.String()); err != nil {
			errs = append(errs, fmt.Errorf("--max-duration %s: %w", d, err))
		}
	}
	return errs
}

// setLimit parses one limit (its set key and value) into s.
func setLimit(s *model.Settings, key, val string) error {
	switch key {
	case "max_pages":
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil || n < 0 {
			return errors.New("must be a number of pages >= 0 (0 = no limit)")
		}
		s.MaxPages = n
	case "max_bytes":
		n, err := bytesize.Parse(val)
		if err != nil {
			return fmt.Errorf("must be a size >= 0 with an optional unit (512MiB, 2GB; 0 = no limit): %w", err)
		}
		s.MaxBytes = n
	case "max_duration":
		d, err := time.ParseDuration(val)
		if err != nil || d < 0 || d%time.Second != 0 {
			return errors.New("must be a duration >= 0 in whole seconds (90m, 2h; 0 = no limit)")
		}
		s.MaxDuration = d
	default:
		return fmt.Errorf("unknown limit %q", key)
	}
	return nil
}

// limitsLine says a crawl's limits in words ("" when none).
func limitsLine(s model.Settings) string {
	var out string
	add := func(part string) {
		if out != "" {
			out += ", "
		}
		out += part
	}
	if s.MaxPages > 0 {
		add(fmt.Sprintf("%d pages", s.MaxPages))
	}
	if s.MaxBytes > 0 {
		add(bytesize.Format(s.MaxBytes))
	}
	if s.MaxDuration > 0 {
		add(s.MaxDuration.String())
	}
	return out
}
