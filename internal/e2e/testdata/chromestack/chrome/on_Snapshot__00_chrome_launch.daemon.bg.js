#!/usr/bin/env node
'use strict';
// One browser per snapshot, in SNAP_DIR/chrome (CHROME_ISOLATION=snapshot).
const s = require('./session.js');

s.launcher('snapshot', s.SNAP_DIR);
