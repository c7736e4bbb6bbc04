// Package metrics owns archiveflow's Prometheus metrics: every metric's
// name, help, type and labels, their registration on this package's own
// registry (Registry), the functions the rest of the code calls to count
// (HookStarted, HookFinished, Fetched, HostBudgetWait, RateLimitBackoff,
// ...), the collectors that read a value at scrape time (a crawl
// frontier's sizes, the log outbox's backlog), the Redis hook and the
// Temporal gRPC interceptor that count call errors, and the HTTP server
// that exposes /metrics (Serve, config metrics.listen).
//
// Labels have bounded values only: plugin names, hook statuses, response
// classes, frontier states, Redis command names, Temporal RPC methods and
// gRPC codes. No URL, job ident or crawled host is ever a label.
// docs/operations.md lists every metric.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// namespace prefixes every metric name.
const namespace = "archiveflow"

// registry holds every metric of this process, and the Go runtime and
// process collectors.
var registry = prometheus.NewRegistry()

func init() {
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// Registry is the process's registry: what /metrics serves.
func Registry() *prometheus.Registry { return registry }

// counterVec registers a counter vector.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	registry.MustRegister(c)
	return c
}

// histogramVec registers a histogram vector with the given buckets.
func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
	registry.MustRegister(h)
	return h
}

// histogram registers a histogram with the given buckets.
func histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets})
	registry.MustRegister(h)
	return h
}

// Handler serves the registry in Prometheus' exposition formats. A
// collector that fails (Redis down at scrape time) leaves its metrics out
// and the others are served.
func Handler() http.Handler {
	return promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Registry: registry})
}

// Server is a running /metrics endpoint.
type Server struct {
	srv  *http.Server
	addr net.Addr
	done chan struct{}
}

// Serve listens on addr (host:port; config.Metrics.Addr gives the address
// with its loopback default) and serves /metrics until Close.
func Serve(addr string, log *zap.Logger) (*Server, error) {
	if log == nil {
		log = zap.NewNop()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s (config metrics.listen): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler())
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, addr: ln.Addr(), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server stopped", zap.Error(err))
		}
	}()
	log.Info("serving metrics", zap.String("url", "http://"+s.addr.String()+"/metrics"))
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Close stops the server, letting a scrape under way finish for up to
// five seconds.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.done
}
