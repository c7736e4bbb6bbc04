package rkeys

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/luascript"
)

// AppendLog appends packets to IDENT_log in one round trip (one Lua script
// per batch): for each packet score = HINCRBY IDENT log_score 1 and ZADD
// IDENT_log score packet, then the log is trimmed to LogCap entries (oldest
// first) and `updates` carries the ident once per batch (ArchiveBot's
// firehose reads every entry newer than last_broadcasted_log_entry on each
// message, so one notification per batch delivers them all).
//
// batchID makes the append repeat-safe: a batch id applied within the last
// LogBatchWindow batches of the job is not applied again. An empty batchID
// means at-least-once (a retry may duplicate lines).
//
// It returns the score of the last entry written (0 when nothing was
// written because the batch was empty or a repeat).
func (s *Store) AppendLog(ctx context.Context, ident, batchID string, packets []Packet) (int64, error) {
	if len(packets) == 0 {
		return 0, nil
	}
	op, result, err := s.AppendLogOp(ctx, ident, batchID, packets)
	if err != nil {
		return 0, err
	}
	return result(op(s.rdb))
}

// AppendLogOp is AppendLog as an op of a pipeline (luascript.Pipeline:
// many pages' packets in one round trip); result reads its command once
// the pipeline ran. packets must not be empty.
func (s *Store) AppendLogOp(ctx context.Context, ident, batchID string, packets []Packet) (op luascript.Op, result func(redis.Cmder) (int64, error), err error) {
	own := "0"
	if *s.opts.OwnResponseCounters {
		own = "1"
	}
	args := make([]any, 0, len(packets)+6)
	args = append(args, ident, s.keys.LogChannel(), s.opts.LogCap, batchID, s.opts.LogBatchWindow, own)
	now := s.now()
	for i, p := range packets {
		if p.TS.IsZero() {
			p.TS = now
		}
		enc, err := p.Encode(s.opts.PacketCap)
		if err != nil {
			return nil, nil, fmt.Errorf("append log of job %s: packet %d: %w", ident, i, err)
		}
		args = append(args, enc)
	}
	keys := map[string]string{"job": s.keys.Job(ident), "log": s.keys.Log(ident), "logbatches": s.keys.LogBatches(ident)}
	op = func(c redis.Cmdable) redis.Cmder { return s.runOn(ctx, c, appendLogScript, keys, nil, args...) }
	result = func(c redis.Cmder) (int64, error) {
		score, err := c.(*redis.Cmd).Int64()
		if err != nil {
			return 0, fmt.Errorf("append log of job %s (%d packets): %w", ident, len(packets), err)
		}
		if score < 0 {
			return 0, codeErr(int(score), "append log of job %s", ident)
		}
		return score, nil
	}
	return op, result, nil
}

// appendLogScript appends a batch of packets with ArchiveBot's logger
// semantics, trims the log to its cap and publishes once.
// ARGV: ident channel cap batch_id window own(0|1) packets...
var appendLogScript = newScript([]string{"job", "log", "logbatches"}, false, `
if redis.call('EXISTS', job) == 0 then return CODE_NOT_FOUND end
local batch = ARGV[4]
if batch ~= '' and redis.call('ZSCORE', logbatches, batch) then return CODE_NOOP end
local score = 0
for i = 7, #ARGV do
  score = redis.call('HINCRBY', job, 'log_score', 1)
  redis.call('ZADD', log, score, ARGV[i])
end
local cap = tonumber(ARGV[3])
redis.call('ZREMRANGEBYRANK', log, 0, -(cap + 1))
inherit_ttl(job, log)
if ARGV[6] == '1' and score > 0 then
  redis.call('HSET', job, 'last_analyzed_log_entry', score)
end
if batch ~= '' then
  redis.call('ZADD', logbatches, score, batch)
  redis.call('ZREMRANGEBYRANK', logbatches, 0, -(tonumber(ARGV[5]) + 1))
  inherit_ttl(job, logbatches)
end
redis.call('PUBLISH', ARGV[2], ARGV[1])
return score
`)

// LogEntry is one IDENT_log entry with its score.
type LogEntry struct {
	Score  int64
	Packet Packet
	Raw    string
}

// ReadLog returns up to n entries with a score greater than after, oldest
// first. Entries that do not decode are returned with a zero Packet and an
// error naming the first bad one after the good ones are collected.
func (s *Store) ReadLog(ctx context.Context, ident string, after int64, n int) ([]LogEntry, error) {
	if n <= 0 {
		return nil, fmt.Errorf("read log of job %s: count %d: must be > 0", ident, n)
	}
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, s.keys.Log(ident), &redis.ZRangeBy{
		Min: "(" + strconv.FormatInt(after, 10), Max: "+inf", Count: int64(n),
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("read log of job %s after %d: %w", ident, after, err)
	}
	out := make([]LogEntry, 0, len(zs))
	var firstErr error
	for _, z := range zs {
		raw, _ := z.Member.(string)
		p, perr := DecodePacket(raw)
		if perr != nil && firstErr == nil {
			firstErr = fmt.Errorf("read log of job %s entry %d: %w", ident, int64(z.Score), perr)
		}
		out = append(out, LogEntry{Score: int64(z.Score), Packet: p, Raw: raw})
	}
	return out, firstErr
}

// LogSubscription follows a job's log; see Subscribe.
type LogSubscription struct {
	// C delivers entries in score order; it is closed when the
	// subscription ends.
	C      <-chan LogEntry
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Close stops the subscription and waits for it to end.
func (l *LogSubscription) Close() {
	l.cancel()
	<-l.done
}

// Err is the reason the subscription ended (nil after Close or when ctx
// was cancelled). Valid after C is closed.
func (l *LogSubscription) Err() error {
	<-l.done
	return l.err
}

// followPoll is the fallback poll interval when no notification arrives
// (a missed PUBLISH must not stall the follower).
const followPoll = 2 * time.Second

const followPage = 500

// Subscribe follows IDENT_log from the entry after `after`: it subscribes to
// `updates` first, then delivers the backlog and every new entry as the
// ident is published (with a slow poll as a safety net). It ends when ctx
// is cancelled, Close is called, or the job's keys disappear.
func (s *Store) Subscribe(ctx context.Context, ident string, after int64) (*LogSubscription, error) {
	ps := s.rdb.Subscribe(ctx, s.keys.LogChannel())
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("subscribe to log of job %s: %w", ident, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan LogEntry, followPage)
	sub := &LogSubscription{C: out, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(sub.done)
		defer close(out)
		defer ps.Close()
		sub.err = s.follow(ctx, ps.Channel(), ident, after, out)
	}()
	return sub, nil
}

func (s *Store) follow(ctx context.Context, msgs <-chan *redis.Message, ident string, after int64, out chan<- LogEntry) error {
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for {
		for {
			entries, err := s.ReadLog(ctx, ident, after, followPage)
			if err != nil && len(entries) == 0 {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			if err != nil {
				s.log.Warn("malformed log entry", logging.Ident(ident), zap.Error(err))
			}
			for _, e := range entries {
				select {
				case out <- e:
					after = e.Score
				case <-ctx.Done():
					return nil
				}
			}
			if len(entries) < followPage {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-msgs:
			if !ok {
				return fmt.Errorf("follow log of job %s: subscription closed", ident)
			}
			if m.Payload != ident {
				continue
			}
		case <-tick.C:
			n, err := s.rdb.Exists(ctx, s.keys.Job(ident)).Result()
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("follow log of job %s: %w", ident, err)
			}
			if n == 0 {
				return fmt.Errorf("follow log of job %s: %w", ident, ErrJobNotFound)
			}
		}
	}
}
