package abbot

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Figures are the numbers ArchiveBot's console prints for a job in
// progress (bot/job_status_generation.rb, JobStatusGeneration#to_status),
// computed from the job's hash the way the bot does: Ruby's to_i/to_f of
// each field, so a missing or malformed field reads as 0.
type Figures struct {
	// MB is bytes_downloaded / 1,000,000 rounded to 2 places ("Downloaded
	// X MB").
	MB float64
	// Errors is error_count ("N errors").
	Errors int64
	// Queued is items_queued - items_downloaded ("M queued").
	Queued int64
}

// JobFigures reads a job's hash as `!status` does.
func (b Bot) JobFigures(ctx context.Context, id string) (Figures, error) {
	h, err := b.Redis.HGetAll(ctx, id).Result()
	if err != nil {
		return Figures{}, fmt.Errorf("!status %s: %w", id, err)
	}
	return figures(h), nil
}

func figures(h map[string]string) Figures {
	mb := float64(RubyToI(h["bytes_downloaded"])) / (1000 * 1000)
	return Figures{MB: math.Round(mb*100) / 100, Errors: RubyToI(h["error_count"]),
		Queued: RubyToI(h["items_queued"]) - RubyToI(h["items_downloaded"])}
}

// Status is the line ArchiveBot's `!status IDENT` prints: Job#amplify's
// reads and JobStatusGeneration#to_status's text (aborted, completed, in
// queue, or in progress with Figures; the rearchival TTL).
func (b Bot) Status(ctx context.Context, id string) (string, error) {
	h, err := b.Redis.HGetAll(ctx, id).Result()
	if err != nil {
		return "", fmt.Errorf("!status %s: %w", id, err)
	}
	if h["url"] == "" {
		return "", fmt.Errorf("!status %s: no job (Job.from_ident needs url)", id)
	}
	_, aborted := h["aborted"]
	_, finished := h["finished_at"]
	_, started := h["started_at"]
	rep := []string{fmt.Sprintf("Job %s <%s>.", id, h["url"])}
	if by, ok := h["started_by"]; ok {
		if note, ok := h["note"]; ok {
			rep = append(rep, fmt.Sprintf("Started by %s; reason: %s.", by, note))
		} else {
			rep = append(rep, fmt.Sprintf("Started by %s.", by))
		}
	}
	switch {
	case aborted:
		rep = append(rep, "Job aborted.")
	case finished:
		rep = append(rep, "Job completed.")
	case !started:
		rep = append(rep, "In queue.")
	default:
		f := figures(h)
		rep = append(rep, fmt.Sprintf("In progress. Downloaded %s MB, %d errors, %d queued.", RubyFloat(f.MB), f.Errors, f.Queued))
		rep = append(rep, fmt.Sprintf("%d workers, delay: %s, %s ms.", RubyToI(h["concurrency"]),
			RubyFloat(RubyToF(h["delay_min"])), RubyFloat(RubyToF(h["delay_max"]))))
	}
	if ttl := b.Redis.TTL(ctx, id).Val(); ttl > 0 {
		s := int64(ttl / time.Second)
		rep = append(rep, fmt.Sprintf("Eligible for rearchival in %dh %dm %ds.", s/3600, s%3600/60, s%3600%60))
	}
	return strings.Join(rep, " "), nil
}

// RubyToI is Ruby's String#to_i: the leading integer, else 0.
func RubyToI(s string) int64 {
	s = strings.TrimSpace(s)
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || end == 0 && s[end] == '-') {
		end++
	}
	n, _ := strconv.ParseInt(s[:end], 10, 64)
	return n
}

// RubyToF is Ruby's String#to_f for the plain decimals archiveflow writes.
func RubyToF(s string) float64 {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return float64(RubyToI(s))
	}
	return f
}

// RubyFloat renders a Float as Ruby's to_s does for ordinary values.
func RubyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
