package fleethealth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
)

// Sender POSTs each notification of the webhook outbox to the webhook URL
// (config flapjack.webhook) through the fetch policy, with retries. It runs
// beside a worker's pools, never in a hook's way: a slow or failing
// webhook delays only the next notification. Each worker moves one
// notification at a time to its own sending list, so several workers
// deliver each once, and a worker killed mid-POST delivers it again at its
// next start.
type Sender struct {
	h      *Health
	url    string
	worker string
	client *http.Client
	log    *zap.Logger
	// Attempts and Backoff (doubling) of one notification's POST.
	Attempts int
	Backoff  time.Duration
}

// NewSender returns the webhook sender of worker (its pipeline nickname).
func (h *Health) NewSender(url string, policy *netpolicy.Policy, worker string, log *zap.Logger) *Sender {
	if log == nil {
		log = zap.NewNop()
	}
	return &Sender{h: h, url: url, worker: worker, log: log.Named("webhook"),
		client:   &http.Client{Transport: egress.Transport(policy), Timeout: 10 * time.Second},
		Attempts: 5, Backoff: time.Second}
}

// sending is the worker's list of the notification it is POSTing.
func (s *Sender) sending() string { return s.h.WebhookOutbox() + ":sending:" + s.worker }

// Run delivers notifications until ctx ends.
func (s *Sender) Run(ctx context.Context) {
	rdb := s.h.store.Client()
	for {
		// What this worker was sending when it stopped goes first.
		if err := rdb.LMove(ctx, s.sending(), s.h.WebhookOutbox(), "RIGHT", "LEFT").Err(); err != nil {
			break
		}
	}
	for ctx.Err() == nil {
		body, err := rdb.BLMove(ctx, s.h.WebhookOutbox(), s.sending(), "LEFT", "RIGHT", time.Second).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("read the webhook outbox", zap.Error(err))
				sleep(ctx, s.Backoff)
			}
			continue
		}
		if err := s.post(ctx, body); err != nil {
			if ctx.Err() != nil {
				return // the next start sends it
			}
			s.log.Warn("webhook notification dropped after its retries", zap.String("url", s.url), zap.Error(err))
		}
		if err := rdb.LRem(context.WithoutCancel(ctx), s.sending(), 1, body).Err(); err != nil {
			s.log.Warn("clear the sent webhook notification", zap.Error(err))
		}
	}
}

// post POSTs body, retrying a failed connection or a non-2xx answer.
func (s *Sender) post(ctx context.Context, body string) error {
	var last error
	wait := s.Backoff
	for attempt := 1; attempt <= s.Attempts; attempt++ {
		if attempt > 1 {
			if !sleep(ctx, wait) {
				return ctx.Err()
			}
			wait *= 2
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader([]byte(body)))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.client.Do(req)
		if err != nil {
			if _, denied := egress.DeniedBy(err); denied {
				return err // the policy will not change its mind
			}
			last = err
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			return nil
		}
		last = fmt.Errorf("webhook answered %s", resp.Status)
	}
	return last
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
