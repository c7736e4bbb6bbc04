package outbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// recorder is a Deliver that records what it got and fails on demand.
type recorder struct {
	mu   sync.Mutex
	got  []string
	fail func(data string, calls int) error
	call map[string]int
}

func newRecorder(fail func(string, int) error) *recorder {
	return &recorder{fail: fail, call: map[string]int{}}
}

func (r *recorder) deliver(_ context.Context, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := string(data)
	r.call[s]++
	if r.fail != nil {
		if err := r.fail(s, r.call[s]); err != nil {
			return err
		}
	}
	r.got = append(r.got, s)
	return nil
}

func (r *recorder) delivered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func fastOpts() Options {
	return Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Rescan: 50 * time.Millisecond}
}

// run starts o.Run and returns the function that stops it and waits.
func run(t *testing.T, o *Outbox) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.Run(ctx)
	}()
	stop := func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context was cancelled")
		}
	}
	t.Cleanup(stop)
	return stop
}

func waitDelivered(t *testing.T, r *recorder, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.delivered()) >= n }, 10*time.Second, 5*time.Millisecond,
		"want %d deliveries, got %v", n, r.delivered())
}

func waitEmpty(t *testing.T, o *Outbox) {
	t.Helper()
	require.Eventually(t, func() bool {
		p, err := o.Pending()
		return err == nil && len(p) == 0
	}, 10*time.Second, 5*time.Millisecond)
}

func TestDeliversInOrderAndRemoves(t *testing.T) {
	r := newRecorder(nil)
	o, err := Open(t.TempDir(), r.deliver, zaptest.NewLogger(t), fastOpts())
	require.NoError(t, err)
	for _, s := range []string{"a", "b", "c"} {
		require.NoError(t, o.Put([]byte(s)))
	}
	p, err := o.Pending()
	require.NoError(t, err)
	assert.Len(t, p, 3, "Put spools before anything is delivered")
	run(t, o)
	waitDelivered(t, r, 3)
	waitEmpty(t, o)
	assert.Equal(t, []string{"a", "b", "c"}, r.delivered())

	// A Put while the loop idles wakes it.
	require.NoError(t, o.Put([]byte("d")))
	waitDelivered(t, r, 4)
	assert.Equal(t, []string{"a", "b", "c", "d"}, r.delivered())
}

func TestRetriesKeepOrder(t *testing.T) {
	down := errors.New("connection refused")
	r := newRecorder(func(s string, calls int) error {
		if s == "first" && calls <= 3 {
			return down
		}
		return nil
	})
	o, err := Open(t.TempDir(), r.deliver, zaptest.NewLogger(t), fastOpts())
	require.NoError(t, err)
	require.NoError(t, o.Put([]byte("first")))
	require.NoError(t, o.Put([]byte("second")))
	run(t, o)
	waitDelivered(t, r, 2)
	waitEmpty(t, o)
	assert.Equal(t, []string{"first", "second"}, r.delivered(), "a failing item holds back the ones after it")
	r.mu.Lock()
	assert.Equal(t, 4, r.call["first"])
	assert.Equal(t, 1, r.call["second"])
	r.mu.Unlock()
}

func TestPermanentIsSetAside(t *testing.T) {
	dir := t.TempDir()
	r := newRecorder(func(s string, _ int) error {
		if s == "bad" {
			return Permanent(errors.New("job gone"))
		}
		return nil
	})
	o, err := Open(dir, r.deliver, zaptest.NewLogger(t), fastOpts())
	require.NoError(t, err)
	require.NoError(t, o.Put([]byte("bad")))
	require.NoError(t, o.Put([]byte("good")))
	run(t, o)
	waitDelivered(t, r, 1)
	waitEmpty(t, o)
	assert.Equal(t, []string{"good"}, r.delivered())
	rej, err := os.ReadDir(filepath.Join(dir, rejectedDir))
	require.NoError(t, err)
	require.Len(t, rej, 1)
	data, err := os.ReadFile(filepath.Join(dir, rejectedDir, rej[0].Name()))
	require.NoError(t, err)
	assert.Equal(t, "bad", string(data), "a refused item is kept, not deleted")
	b, err := o.Backlog()
	require.NoError(t, err)
	assert.Equal(t, Backlog{Pending: 0, Rejected: 1}, b)
}

func TestBacklogCountsWaitingAndRejected(t *testing.T) {
	dir := t.TempDir()
	o, err := Open(dir, func(context.Context, []byte) error { return errors.New("down") }, zaptest.NewLogger(t), fastOpts())
	require.NoError(t, err)
	b, err := o.Backlog()
	require.NoError(t, err)
	assert.Equal(t, Backlog{}, b, "a fresh outbox has no rejected/ yet")

	for _, item := range []string{"one", "two", "three"} {
		require.NoError(t, o.Put([]byte(item)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, tmpPrefix+"half"), []byte("x"), 0o644))
	b, err = o.Backlog()
	require.NoError(t, err)
	assert.Equal(t, Backlog{Pending: 3}, b, "temporary files are not items")
}

func TestItemsSurviveTheProcess(t *testing.T) {
	dir := t.TempDir()
	// The first process spools and dies without ever delivering.
	first, err := Open(dir, func(context.Context, []byte) error { return errors.New("down") }, zaptest.NewLogger(t), fastOpts())
	require.NoError(t, err)
	require.NoError(t, first.Put([]byte("one")))
	require.NoError(t, first.Put([]byte("two")))

	r := newRecorder(nil)
	second, err := Open(dir, r.deliver, zaptest.NewLogger(t), fastOpts())
	require.NoError(t, err)
	run(t, second)
	waitDelivered(t, r, 2)
	assert.Equal(t, []string{"one", "two"}, r.delivered())
}

func TestTempFiles(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, tmpPrefix+"stale")
	fresh := filepath.Join(dir, tmpPrefix+"fresh")
	require.NoError(t, os.WriteFile(stale, []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(fresh, []byte("y"), 0o644))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(stale, old, old))

	r := newRecorder(nil)
	o, err := Open(dir, r.deliver, zaptest.NewLogger(t), fastOpts())
	require.NoError(t, err)
	assert.NoFileExists(t, stale, "an old unfinished Put is removed")
	assert.FileExists(t, fresh, "a Put that may still be in progress is left alone")
	require.NoError(t, o.Put([]byte("real")))
	run(t, o)
	waitDelivered(t, r, 1)
	waitEmpty(t, o)
	assert.Equal(t, []string{"real"}, r.delivered(), "temporary files are never delivered")
}

func TestRunStopsWhileFailing(t *testing.T) {
	calls := make(chan struct{}, 100)
	o, err := Open(t.TempDir(), func(context.Context, []byte) error {
		calls <- struct{}{}
		return errors.New("down")
	}, zaptest.NewLogger(t), fastOpts())
	require.NoError(t, err)
	require.NoError(t, o.Put([]byte("kept")))
	stop := run(t, o)
	for range 3 {
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery attempt")
		}
	}
	stop()
	p, err := o.Pending()
	require.NoError(t, err)
	assert.Len(t, p, 1, "an undelivered item stays for the next Run")
}

func TestPermanentWrapping(t *testing.T) {
	base := errors.New("job gone")
	err := Permanent(base)
	assert.True(t, IsPermanent(err))
	assert.True(t, IsPermanent(errors.Join(errors.New("ctx"), err)))
	assert.ErrorIs(t, err, base)
	assert.False(t, IsPermanent(base))
	assert.Equal(t, "job gone", err.Error())
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(t.TempDir(), nil, nil, Options{})
	assert.ErrorContains(t, err, "deliver must not be nil")
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = Open(filepath.Join(file, "sub"), func(context.Context, []byte) error { return nil }, nil, Options{})
	assert.ErrorContains(t, err, "outbox "+filepath.Join(file, "sub"))
}
