#!/bin/sh
# archiveflow built-in hook "headers": HTTP status, final URL and response headers of the page (headers.json) and its body (response.body).
# The work is done by the archiveflow binary (internal/builtin). The URL is
# data: "$@" is passed through untouched and never evaluated by a shell.
exec "${ARCHIVEFLOW_BIN:-archiveflow}" hook headers "$@"
