// Package metricstest reads a /metrics endpoint for tests: it scrapes the
// text exposition and parses it with Prometheus' own parser
// (github.com/prometheus/common/expfmt), so a test checks what a Prometheus
// server would read.
package metricstest

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are parsed metric families by name.
type Families map[string]*dto.MetricFamily

// Parse parses the text exposition format.
func Parse(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return Families(fams), nil
}

// Scrape GETs url (…/metrics), asking for the text format, and parses it.
func Scrape(ctx context.Context, url string) (Families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("scrape %s: %s: %s", url, resp.Status, b)
	}
	return Parse(resp.Body)
}

// Gather reads a registry's families directly (no exposition, no
// parsing): for a test of code that counts into this process's registry
// (metrics.Registry()).
func Gather(g prometheus.Gatherer) (Families, error) {
	fams, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather metrics: %w", err)
	}
	out := Families{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out, nil
}

// Sum adds the values of name's samples (a counter's or gauge's value, a
// histogram's sample count) whose labels include every pair of labels
// (name, value, name, value, ...); 0 when there are none.
func (f Families) Sum(name string, labels ...string) float64 {
	fam, ok := f[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum
}

// ByLabel sums name's samples by the value of one label.
func (f Families) ByLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	fam, ok := f[name]
	if !ok {
		return out
	}
	for _, m := range fam.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] += Families{name: &dto.MetricFamily{Metric: []*dto.Metric{m}}}.Sum(name)
			}
		}
	}
	return out
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
