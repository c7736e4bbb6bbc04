#!/bin/sh
# archiveflow built-in hook "pdf": PDF print of the page rendered by headless Chromium (output.pdf).
# The work is done by the archiveflow binary (internal/builtin). The URL is
# data: "$@" is passed through untouched and never evaluated by a shell.
exec "${ARCHIVEFLOW_BIN:-archiveflow}" hook pdf "$@"
