package frontier

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// Limits of the encoding and of one script call.
const (
	// MaxURLBytes is the longest page URL accepted, after normalisation
	// (8 KiB: longer than any URL a browser or wpull keeps in practice,
	// short enough that a few of them never dominate a job's memory).
	MaxURLBytes = 8 << 10
	// MaxChunk is the most links one Discover script call processes; the
	// Go side splits longer lists so no call blocks Redis for long.
	MaxChunk = 1000
	// MaxClaim is the most pages one Claim takes: a crawl claims up to its
	// concurrency, which model.Settings.Validate bounds to this.
	MaxClaim = model.MaxConcurrency
	// MaxAttempts is the largest Config.MaxAttempts.
	MaxAttempts = 1000
	// MaxNoteBytes caps a stored outcome note or skip reason.
	MaxNoteBytes = 1 << 10
	// maxRulesVersion is the largest rules version the record stores.
	maxRulesVersion = math.MaxUint32
	// maxPageID is the largest page id the record's parent field holds.
	maxPageID = math.MaxUint32
)

// Tuning defaults (internal: not user configuration).
const (
	defaultChunk        = MaxChunk
	defaultSettleBudget = 2000
	defaultSettleRounds = 10000
)

// Typed errors; callers test them with errors.Is.
var (
	// ErrNoFrontier: the job has no frontier (never seeded, expired, or
	// being deleted). A late retry never recreates one.
	ErrNoFrontier = errors.New("no frontier for this job")
	// ErrSeedConflict: Seed found a frontier seeded with another URL or
	// configuration.
	ErrSeedConflict = errors.New("frontier already seeded differently")
	// ErrUnknownPage: a page id that the job does not have.
	ErrUnknownPage = errors.New("unknown page")
	// ErrNotClaimed: a Discover or Complete for a page that is not CLAIMED
	// by that attempt (released, re-claimed, finished or never claimed).
	ErrNotClaimed = errors.New("page is not claimed by this attempt")
	// ErrOutOfOrder: a Discover batch that skips an earlier batch of the
	// same attempt.
	ErrOutOfOrder = errors.New("link batch out of order")
	// ErrInvalidState: a state change the page's state does not allow
	// (skipping a DONE or DEFERRED page).
	ErrInvalidState = errors.New("page state does not allow this")
	// ErrInvalidURL: a URL that is empty, does not normalise or is longer
	// than MaxURLBytes.
	ErrInvalidURL = errors.New("invalid page url")
	// ErrInvalidArgument: a parameter outside its documented range.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrLeftoverKeys: Seed found page keys of an earlier frontier whose
	// Delete did not finish; run Delete again first.
	ErrLeftoverKeys = errors.New("leftover keys of an earlier frontier")
)

// State is a page's state.
type State string

// Page states. DONE covers both final outcomes (Status tells which).
const (
	StateReady    State = "ready"    // eligible, waiting for a claim
	StateClaimed  State = "claimed"  // being fetched by one attempt
	StateSkipped  State = "skipped"  // moved aside (rules), never fetched again
	StateDone     State = "done"     // attempts_remaining reached 0: succeeded or failed
	StateDeferred State = "deferred" // known but beyond the depth limit
)

// States lists every state in the order of the record's state codes (1..5).
var States = []State{StateReady, StateClaimed, StateSkipped, StateDone, StateDeferred}

// ParseState parses a state name.
func ParseState(s string) (State, error) {
	for _, st := range States {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("page state %q: %w: must be one of ready, claimed, skipped, done, deferred", s, ErrInvalidArgument)
}

// Status is the outcome of a page's last attempt (or skip).
type Status string

// Statuses; the empty status means no attempt finished yet.
const (
	StatusNone      Status = ""
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusTransient Status = "transient" // failed, will be retried
	StatusSkipped   Status = "skipped"
	// StatusPostponed: the page's host was busy or rate-limited; the page
	// is READY again after Outcome.NotBefore, its attempt kept.
	StatusPostponed Status = "postponed"
	// StatusWaiting: the page's attempts ran out on transient outcomes and
	// it waits READY for its next later retry (Config.RetryLater), not
	// claimed before Page.RetryAt.
	StatusWaiting Status = "waiting"
)

// statuses is indexed by the record's status code.
var statuses = []Status{StatusNone, StatusSucceeded, StatusFailed, StatusTransient, StatusSkipped, StatusPostponed, StatusWaiting}

// Config is a frontier's configuration, fixed at Seed.
type Config struct {
	// MaxDepth is the depth limit: pages deeper are DEFERRED. -1 = unlimited.
	MaxDepth int
	// MaxAttempts is every page's initial attempts_remaining (1..MaxAttempts).
	MaxAttempts int
	// QueuedField, when set, names the field of the job hash
	// (rkeys.Keys.Job(ident)) that every script moves, atomically with the
	// change, by the change in the pages waiting (READY or CLAIMED): +1 for
	// a page made READY (new within the limit, DEFERRED promoted into it,
	// requeued for a retry), -1 for a page whose outcome is final (DONE,
	// SKIPPED). ArchiveBot's items_queued is this plus what the caller adds
	// with each download (jobstore: items_queued - items_downloaded is the
	// pages waiting, never negative, 0 when the crawl is finished). The seed
	// counts. The job hash must exist at Seed; later scripts never create it.
	QueuedField string
	// RetryLater are the delays of a page's later retries (the ArchiveBox
	// plan's retry_at for crawl pages): a page whose attempts all ended
	// transiently waits the first delay (StatusWaiting), then gets
	// MaxAttempts fresh attempts, and so on down the list; after the last
	// it is DONE failed. Empty (every frontier before it): failed at once.
	// At most MaxRetryLater delays, each at least a millisecond.
	RetryLater []time.Duration
}

// MaxRetryLater bounds Config.RetryLater (the record counts a page's later
// retries in one byte).
const MaxRetryLater = 255

// retryLaterArg is Config.RetryLater as the metadata hash keeps it:
// milliseconds, comma-separated ("" for none).
func (c Config) retryLaterArg() string {
	ms := make([]string, len(c.RetryLater))
	for i, d := range c.RetryLater {
		ms[i] = strconv.FormatInt(d.Milliseconds(), 10)
	}
	return strings.Join(ms, ",")
}

func (c Config) validate() error {
	if len(c.RetryLater) > MaxRetryLater {
		return fmt.Errorf("retry later: %d delays: %w: at most %d", len(c.RetryLater), ErrInvalidArgument, MaxRetryLater)
	}
	for i, d := range c.RetryLater {
		if d < time.Millisecond {
			return fmt.Errorf("retry later delay %d (%s): %w: must be >= 1ms", i, d, ErrInvalidArgument)
		}
	}
	switch {
	case c.MaxDepth < -1:
		return fmt.Errorf("max depth %d: %w: must be -1 (unlimited) or >= 0", c.MaxDepth, ErrInvalidArgument)
	case c.MaxAttempts < 1 || c.MaxAttempts > MaxAttempts:
		return fmt.Errorf("max attempts %d: %w: must be 1..%d", c.MaxAttempts, ErrInvalidArgument, MaxAttempts)
	}
	return nil
}

// Page is one page of a job.
type Page struct {
	ID    int64  `json:"id"`
	URL   string `json:"url"`
	Depth int    `json:"depth"`
	// Parent is the page through which the current (minimum) depth was
	// found; 0 for the seed.
	Parent int64 `json:"parent"`
	State  State `json:"state"`
	// Status is the last outcome (failed also when transient failures
	// used up the attempts).
	Status Status `json:"status,omitempty"`
	// Attempts counts claims: each claim is a new attempt number, so a late
	// completion of a released claim is told apart.
	Attempts int `json:"attempts"`
	// AttemptsRemaining is spent by outcomes only (a transient failure
	// spends one; success and failure set it to 0; a release spends none;
	// a later retry gives Config.MaxAttempts again).
	AttemptsRemaining int `json:"attempts_remaining"`
	// LaterRetries counts the later retries the page took
	// (Config.RetryLater), RetryAt is when a waiting page is due.
	LaterRetries int       `json:"later_retries,omitempty"`
	RetryAt      time.Time `json:"retry_at,omitzero"`
	NoRecurse    bool      `json:"no_recurse,omitempty"`
	Requisite    bool      `json:"requisite,omitempty"`
	// Charged: the page counts against a page budget (ClaimWithin).
	Charged      bool   `json:"charged,omitempty"`
	RulesVersion int64  `json:"rules_version,omitempty"` // of the last claim
	Note         string `json:"note,omitempty"`          // last outcome note / skip reason
	Claimer      string `json:"claimer,omitempty"`       // claim token while CLAIMED
}

// Options tune a Frontier. Zero values take the defaults.
type Options struct {
	// Chunk is the most links per Discover script call (default and
	// maximum MaxChunk).
	Chunk int
	// SettleBudget is the most relations one propagation call visits
	// (default 2000).
	SettleBudget int
	// SettleRounds bounds the propagation calls one Discover makes before
	// it returns; work left over is finished by later calls (default 10000).
	SettleRounds int
	// Logger (default: none).
	Logger *zap.Logger
	// HostBudget, when set, is the host budget's key prefix
	// (rkeys.Keys.HostBudgetPrefix): Claim leaves a page whose host is
	// backed off, waits for its delay or is at its concurrency READY with
	// a not-before time instead of claiming it (internal/hostbudget).
	HostBudget string
	// HostConcurrency is the default per-host concurrency Claim assumes
	// for a host no fetch recorded its own for yet.
	HostConcurrency int
}

// Frontier reads and writes the frontiers of crawl jobs in Redis.
type Frontier struct {
	rdb  redis.UniversalClient
	keys rkeys.Keys
	opts Options
	log  *zap.Logger
}

// New returns a Frontier writing through rdb under keys' namespace.
func New(rdb redis.UniversalClient, keys rkeys.Keys, opts Options) (*Frontier, error) {
	if rdb == nil {
		return nil, errors.New("frontier: redis client must not be nil")
	}
	if opts.Chunk == 0 {
		opts.Chunk = defaultChunk
	}
	if opts.SettleBudget == 0 {
		opts.SettleBudget = defaultSettleBudget
	}
	if opts.SettleRounds == 0 {
		opts.SettleRounds = defaultSettleRounds
	}
	switch {
	case opts.Chunk < 1 || opts.Chunk > MaxChunk:
		return nil, fmt.Errorf("frontier chunk %d: %w: must be 1..%d", opts.Chunk, ErrInvalidArgument, MaxChunk)
	case opts.SettleBudget < 1:
		return nil, fmt.Errorf("frontier settle budget %d: %w: must be >= 1", opts.SettleBudget, ErrInvalidArgument)
	case opts.SettleRounds < 1:
		return nil, fmt.Errorf("frontier settle rounds %d: %w: must be >= 1", opts.SettleRounds, ErrInvalidArgument)
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Frontier{rdb: rdb, keys: keys, opts: opts, log: opts.Logger.Named("frontier")}, nil
}

func checkIdent(ident string) error {
	if ident == "" {
		return fmt.Errorf("job ident: %w: must not be empty", ErrInvalidArgument)
	}
	return nil
}

func checkPageID(ident string, id int64) error {
	if id < 1 || id > maxPageID {
		return fmt.Errorf("job %s page id %d: %w: must be 1..%d", ident, id, ErrInvalidArgument, int64(maxPageID))
	}
	return nil
}

func checkAttempt(ident string, id int64, attempt int) error {
	if attempt < 1 || attempt > math.MaxUint16 {
		return fmt.Errorf("job %s page %d attempt %d: %w: must be 1..%d", ident, id, attempt, ErrInvalidArgument, math.MaxUint16)
	}
	return nil
}

// truncateNote caps a note at MaxNoteBytes on a UTF-8 boundary.
func truncateNote(s string) string {
	if len(s) <= MaxNoteBytes {
		return s
	}
	cut := MaxNoteBytes
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}
