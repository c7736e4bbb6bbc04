#!/bin/sh
# archiveflow built-in hook "hashes": sha256 of every output file of the snapshot (hashes.json, sha256sums.txt).
# The work is done by the archiveflow binary (internal/builtin). The URL is
# data: "$@" is passed through untouched and never evaluated by a shell.
exec "${ARCHIVEFLOW_BIN:-archiveflow}" hook hashes "$@"
