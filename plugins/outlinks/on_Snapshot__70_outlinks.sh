#!/bin/sh
# archiveflow built-in hook "outlinks": Every hyperlink of the page as Snapshot records and urls.jsonl.
# The work is done by the archiveflow binary (internal/builtin). The URL is
# data: "$@" is passed through untouched and never evaluated by a shell.
exec "${ARCHIVEFLOW_BIN:-archiveflow}" hook outlinks "$@"
