// Package outbox owns the delivery of writes that could not be made when
// they were produced: each item is spooled to a file in one directory before
// Put returns, and a delivery loop hands the items to a Deliver function in
// the order they were put, retrying with backoff until it succeeds. Items
// survive a crash of the process (the next Run in the same directory
// delivers them), and a delivered item is removed. An item Deliver refuses
// for good (Permanent) is moved to the rejected/ subdirectory with a
// warning, never deleted.
//
// Deliver must be repeat-safe: an item whose delivery succeeded may be
// delivered again when the process dies before removing its file, or when
// two processes share the directory.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Deliver writes one item's data to its destination.
type Deliver func(ctx context.Context, data []byte) error

// permanentError marks an error retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent wraps err so the outbox sets the item aside instead of retrying
// it.
func Permanent(err error) error { return permanentError{err: err} }

// IsPermanent reports whether err was wrapped by Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// Options tune the delivery loop. Zero values take the defaults.
type Options struct {
	// MinBackoff and MaxBackoff bound the wait after a failed delivery; it
	// doubles from MinBackoff up to MaxBackoff and resets on success.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// Rescan is how often an idle loop looks at the directory for items
	// other processes left there.
	Rescan time.Duration
	// AttemptTimeout bounds one Deliver call.
	AttemptTimeout time.Duration
}

// Defaults for Options fields left zero.
const (
	DefaultMinBackoff     = 250 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	DefaultRescan         = time.Minute
	DefaultAttemptTimeout = 30 * time.Second
)

func (o Options) withDefaults() Options {
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(DefaultMaxBackoff, o.MinBackoff)
	}
	if o.Rescan <= 0 {
		o.Rescan = DefaultRescan
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	return o
}

const (
	itemExt     = ".item"
	tmpPrefix   = ".tmp-"
	rejectedDir = "rejected"
	// staleTmp is the age past which a temporary file is taken as the
	// remains of a Put that crashed before its rename.
	staleTmp = 10 * time.Minute
)

// Outbox is a directory of items waiting for delivery.
type Outbox struct {
	dir     string
	deliver Deliver
	log     *zap.Logger
	opts    Options
	wake    chan struct{}
	seq     atomic.Uint64
	pid     int
	running sync.Mutex // one delivery loop per Outbox
}

// Open prepares dir (created when missing) as an outbox delivering through
// deliver. It removes temporary files older than ten minutes, which a crash
// during Put left behind; they were never acknowledged to a caller.
func Open(dir string, deliver Deliver, log *zap.Logger, opts Options) (*Outbox, error) {
	if deliver == nil {
		return nil, errors.New("outbox: deliver must not be nil")
	}
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("outbox %s: %w", dir, err)
	}
	o := &Outbox{dir: dir, deliver: deliver, log: log.With(zap.String("outbox", dir)),
		opts: opts.withDefaults(), wake: make(chan struct{}, 1), pid: os.Getpid()}
	o.removeStaleTemps()
	return o, nil
}

// Dir is the outbox directory.
func (o *Outbox) Dir() string { return o.dir }

// Put stores data as a new item, durably (written, synced and renamed into
// place) before it returns, and wakes the delivery loop. Items are
// delivered in the order of their Puts within one process.
func (o *Outbox) Put(data []byte) error {
	name := fmt.Sprintf("%020d-%d-%06d%s", time.Now().UnixNano(), o.pid, o.seq.Add(1), itemExt)
	tmp, err := os.CreateTemp(o.dir, tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("outbox put: %w", err)
	}
	cleanup := func() { _ = os.Remove(tmp.Name()) }
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		cleanup()
		return fmt.Errorf("outbox put %s: %w", name, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		cleanup()
		return fmt.Errorf("outbox put %s: sync: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		cleanup()
		return fmt.Errorf("outbox put %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(o.dir, name)); err != nil {
		cleanup()
		return fmt.Errorf("outbox put %s: %w", name, err)
	}
	o.syncDir()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return nil
}

// Pending returns the names of the items waiting for delivery, oldest
// first.
func (o *Outbox) Pending() ([]string, error) {
	ents, err := os.ReadDir(o.dir)
	if err != nil {
		return nil, fmt.Errorf("outbox %s: %w", o.dir, err)
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), itemExt) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Backlog counts what an outbox holds: items waiting for delivery and items
// refused for good and set aside in rejected/.
type Backlog struct {
	Pending, Rejected int
}

// Backlog counts the items waiting and the items set aside. The directory
// may be shared with other processes: the counts cover all of them.
func (o *Outbox) Backlog() (Backlog, error) {
	pending, err := o.Pending()
	if err != nil {
		return Backlog{}, err
	}
	b := Backlog{Pending: len(pending)}
	ents, err := os.ReadDir(filepath.Join(o.dir, rejectedDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return b, fmt.Errorf("outbox %s: %w", o.dir, err)
	}
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), itemExt) {
			b.Rejected++
		}
	}
	return b, nil
}

// Run delivers items until ctx is done. Items not yet delivered then stay
// in the directory for the next Run. Only one Run per Outbox runs at a
// time; a second call waits for the first to return.
func (o *Outbox) Run(ctx context.Context) {
	o.running.Lock()
	defer o.running.Unlock()
	backoff := o.opts.MinBackoff
	failures := 0
	for ctx.Err() == nil {
		delivered, err := o.drain(ctx)
		if err == nil {
			if failures > 0 {
				o.log.Info("outbox delivering again", zap.Int("failed_attempts", failures))
			}
			failures, backoff = 0, o.opts.MinBackoff
			if !o.idle(ctx) {
				return
			}
			continue
		}
		if delivered > 0 {
			backoff = o.opts.MinBackoff
		}
		failures++
		if failures == 1 || failures%20 == 0 {
			o.log.Warn("outbox delivery failed; retrying", zap.Int("failed_attempts", failures),
				zap.Duration("backoff", backoff), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, o.opts.MaxBackoff)
	}
}

// idle waits for a Put, the rescan interval or the end of ctx; it reports
// whether the loop should go on.
func (o *Outbox) idle(ctx context.Context) bool {
	t := time.NewTimer(o.opts.Rescan)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-o.wake:
	case <-t.C:
	}
	return true
}

// drain delivers every pending item in order and stops at the first one
// that fails for a reason worth retrying. It returns how many it delivered.
func (o *Outbox) drain(ctx context.Context) (int, error) {
	names, err := o.Pending()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		if err := o.deliverOne(ctx, name); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// deliverOne delivers the named item and removes it; an item refused for
// good is moved to rejected/.
func (o *Outbox) deliverOne(ctx context.Context, name string) error {
	path := filepath.Join(o.dir, name)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // delivered by another process sharing the directory
	}
	if err != nil {
		return fmt.Errorf("read outbox item %s: %w", name, err)
	}
	dctx, cancel := context.WithTimeout(ctx, o.opts.AttemptTimeout)
	err = o.deliver(dctx, data)
	cancel()
	switch {
	case err == nil:
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove delivered outbox item %s: %w", name, err)
		}
		return nil
	case IsPermanent(err):
		o.reject(name, err)
		return nil
	default:
		return fmt.Errorf("deliver outbox item %s: %w", name, err)
	}
}

// reject moves an item Deliver refused for good to rejected/, keeping it
// for an operator.
func (o *Outbox) reject(name string, cause error) {
	dst := filepath.Join(o.dir, rejectedDir)
	err := os.MkdirAll(dst, 0o755)
	if err == nil {
		err = os.Rename(filepath.Join(o.dir, name), filepath.Join(dst, name))
	}
	if errors.Is(err, os.ErrNotExist) {
		return // another process got there first
	}
	if err != nil {
		o.log.Error("outbox item refused and could not be set aside; it will be retried",
			zap.String("item", name), zap.NamedError("cause", cause), zap.Error(err))
		return
	}
	o.log.Warn("outbox item refused for good; kept in rejected/",
		zap.String("item", filepath.Join(dst, name)), zap.Error(cause))
}

// removeStaleTemps deletes temporary files of Puts that never completed.
func (o *Outbox) removeStaleTemps() {
	ents, err := os.ReadDir(o.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), tmpPrefix) {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < staleTmp {
			continue
		}
		if err := os.Remove(filepath.Join(o.dir, e.Name())); err == nil {
			o.log.Info("removed an unfinished outbox write", zap.String("file", e.Name()))
		}
	}
}

// syncDir makes a rename durable; failure only weakens crash safety.
func (o *Outbox) syncDir() {
	d, err := os.Open(o.dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}
