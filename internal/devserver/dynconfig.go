package devserver

// DefaultDynamicConfig returns the dynamic config the dev server runs with
// unless Options.DynamicConfig overrides a key. It tunes a single-host
// server for latency rather than for protecting a shared database:
//
//   - The history service reads its task queues at most MaxPollRPS times a
//     second per shard. With the stock 20, every workflow step waits ~50 ms
//     for the transfer queue (dispatch of workflow and activity tasks) and
//     timers fire late; 1000 brings a step down to ~10 ms. The visibility
//     and outbound queues get the same limit so list queries, the Web UI and
//     callbacks see changes promptly.
//   - system.forceSearchAttributesCacheRefreshOnRead makes search
//     attributes registered a moment ago usable at once.
//   - Workflow update (used by set_settings-style calls) is enabled
//     explicitly, including async accepted updates, so the behaviour does
//     not depend on the server version's default.
//   - One task queue partition: with a handful of pollers on one host,
//     partitions only add forwarding hops between matching partitions.
func DefaultDynamicConfig() map[string]any {
	return map[string]any{
		"history.transferProcessorMaxPollRPS":   1000,
		"history.timerProcessorMaxPollRPS":      1000,
		"history.visibilityProcessorMaxPollRPS": 1000,
		"history.outboundProcessorMaxPollRPS":   1000,

		"system.forceSearchAttributesCacheRefreshOnRead": true,

		"frontend.enableUpdateWorkflowExecution":              true,
		"frontend.enableUpdateWorkflowExecutionAsyncAccepted": true,

		"matching.numTaskqueueReadPartitions":  1,
		"matching.numTaskqueueWritePartitions": 1,
	}
}
