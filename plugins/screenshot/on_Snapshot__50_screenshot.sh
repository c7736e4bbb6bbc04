#!/bin/sh
# archiveflow built-in hook "screenshot": PNG screenshot of the page rendered by headless Chromium (screenshot.png).
# The work is done by the archiveflow binary (internal/builtin). The URL is
# data: "$@" is passed through untouched and never evaluated by a shell.
exec "${ARCHIVEFLOW_BIN:-archiveflow}" hook screenshot "$@"
