#!/bin/sh
# archiveflow built-in hook "dom": The page's DOM after rendering by headless Chromium (output.html).
# The work is done by the archiveflow binary (internal/builtin). The URL is
# data: "$@" is passed through untouched and never evaluated by a shell.
exec "${ARCHIVEFLOW_BIN:-archiveflow}" hook dom "$@"
