#!/bin/sh
# archiveflow built-in hook "pagefetch": a crawl page's fetch into page.warc.gz.
# The work is done by the archiveflow binary (internal/builtin). The URL is
# data: "$@" is passed through untouched and never evaluated by a shell.
exec "${ARCHIVEFLOW_BIN:-archiveflow}" hook pagefetch "$@"
