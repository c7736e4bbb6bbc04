#!/bin/sh
# archiveflow built-in hook "index": Summary of the snapshot's results (index.json, index.html).
# The work is done by the archiveflow binary (internal/builtin). The URL is
# data: "$@" is passed through untouched and never evaluated by a shell.
exec "${ARCHIVEFLOW_BIN:-archiveflow}" hook index "$@"
