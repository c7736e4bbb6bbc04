package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/archiveflow/archiveflow/internal/outbox"
)

// LogBatch is one numbered batch of an attempt's job-log entries, as RunHook
// hands it to the log outbox when Redis did not take it before the attempt
// ended. Key and Seq are the batch's identity in Store.AppendLog, so a
// batch that reached Redis after all is not appended again.
type LogBatch struct {
	Ident   string     `json:"ident"`
	Key     string     `json:"key"`
	Seq     int        `json:"seq"`
	Entries []LogEntry `json:"entries"`
}

// validate checks a decoded batch before it is written.
func (b LogBatch) validate() error {
	switch {
	case b.Ident == "":
		return errors.New("ident must not be empty")
	case b.Key == "":
		return errors.New("key must not be empty")
	case b.Seq < 0:
		return fmt.Errorf("seq %d: must be >= 0", b.Seq)
	case len(b.Entries) == 0:
		return errors.New("entries must not be empty")
	}
	return nil
}

// LogDelivery is the outbox Deliver for spooled log batches: it appends a
// batch to its job's log with the batch's own key and seq. A batch that
// cannot be decoded, or whose job is gone from Redis, is refused for good
// (the outbox keeps it in rejected/); any other error is retried.
func LogDelivery(store Store) outbox.Deliver {
	return func(ctx context.Context, data []byte) error {
		var b LogBatch
		if err := json.Unmarshal(data, &b); err != nil {
			return outbox.Permanent(fmt.Errorf("decode spooled log batch: %w", err))
		}
		if err := b.validate(); err != nil {
			return outbox.Permanent(fmt.Errorf("spooled log batch %s#%d of %q: %w", b.Key, b.Seq, b.Ident, err))
		}
		err := store.AppendLog(ctx, b.Ident, b.Key, b.Seq, b.Entries)
		if errors.Is(err, ErrNotWritable) {
			return outbox.Permanent(err)
		}
		return err
	}
}

// spoolLog hands undelivered batches to the log outbox. It reports the
// entries it could not spool (none when every Put succeeded).
func spoolLog(ob *outbox.Outbox, batches []LogBatch) (lost int, err error) {
	for i, b := range batches {
		if ob == nil {
			err = errors.New("this worker has no log outbox")
		} else {
			var data []byte
			if data, err = json.Marshal(b); err == nil {
				err = ob.Put(data)
			}
		}
		if err != nil {
			for _, rest := range batches[i:] {
				lost += len(rest.Entries)
			}
			return lost, fmt.Errorf("spool log batch %s#%d of %s: %w", b.Key, b.Seq, b.Ident, err)
		}
	}
	return 0, nil
}
