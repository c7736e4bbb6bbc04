#!/usr/bin/env node
'use strict';
// One browser per snapshot, in SNAP_DIR/chrome (CHROME_ISOLATION=snapshot).
const path = require('path');
const s = require('./session.js');

if (s.isolation() !== 'snapshot') {
  s.record('skipped', { output_str: 'CHROME_ISOLATION=crawl' });
  process.exit(0);
}
s.daemon(path.join(s.SNAP_DIR, 'chrome'), 'snapshot-launch').catch((e) => {
  console.error(`ERROR: ${e.message}`);
  s.record('failed', { error: e.message });
  process.exit(1);
});
