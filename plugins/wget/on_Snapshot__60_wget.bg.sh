#!/bin/sh
# archiveflow built-in hook "wget": The page and its requisites (FETCH_DEPTH=inf: the whole site) in a WARC, fetched by GNU Wget.
# The work is done by the archiveflow binary (internal/builtin). The URL is
# data: "$@" is passed through untouched and never evaluated by a shell.
exec "${ARCHIVEFLOW_BIN:-archiveflow}" hook wget "$@"
