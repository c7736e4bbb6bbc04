//go:build dev || cluster

package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/searchattr"
	"github.com/archiveflow/archiveflow/internal/webui"
)

// TestWebUIListsJobsFilteredBySearchAttributes points the Web UI (the
// ui-server version go.mod pins, as the temporal-ui service runs it) at the
// cluster, finishes two jobs and loads the workflow list in headless
// Chromium with queries on archiveflow's search attributes: each query
// lists exactly the job it names.
func TestWebUIListsJobsFilteredBySearchAttributes(t *testing.T) {
	browser, err := webui.Chromium()
	if err != nil {
		t.Skip(err)
	}
	c := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ui, err := webui.Start(ctx, webui.Options{Host: "127.0.0.1", TemporalAddr: c.Temporal.HostPort(), Namespace: c.Namespace})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, ui.Stop()) })

	root := t.TempDir()
	hook(t, root, "ok", "on_Snapshot__00_ok.sh", succeeded)
	e := newEnv(t, root, "ARCHIVEFLOW_TEMPORAL_UI_URL="+ui.URL())
	e.StartWorker(t, "w1")
	jobs := e.Submit(t, urls("webui", 2))
	e.WaitFinal(t, 2, deadline)
	a, b := jobs[0], jobs[1]
	st := e.Status(t, a.Ident)
	assert.True(t, strings.HasPrefix(st.UI, ui.URL()+"/"), "status links to this Web UI: %s", st.UI)

	cases := []struct {
		query       string
		want, other Job
	}{
		{fmt.Sprintf(`%s=%q AND %s=%q AND %s="finished"`, searchattr.NameIdent, a.Ident, searchattr.NamePool, e.Pool.Name, searchattr.NameState), a, b},
		{fmt.Sprintf(`%s=%q AND %s>=0`, searchattr.NameURL, b.URL, searchattr.NameStep), b, a},
	}
	for _, tc := range cases {
		page := webui.WorkflowsURL(ui.URL(), c.Namespace, tc.query)
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		dom, err := webui.WaitListed(ctx, browser, page, webui.WorkflowLink(c.Namespace, tc.want.Ident), time.Second)
		cancel()
		require.NoError(t, err, "the Web UI lists %s for %s", tc.want.Ident, tc.query)
		assert.NotContains(t, dom, webui.WorkflowLink(c.Namespace, tc.other.Ident), "query %s lists only %s", tc.query, tc.want.Ident)
		assert.Contains(t, dom, "SnapshotWorkflow")
		assert.Contains(t, dom, "Completed")
	}
}
