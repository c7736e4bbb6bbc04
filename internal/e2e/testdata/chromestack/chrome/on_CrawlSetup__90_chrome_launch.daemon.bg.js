#!/usr/bin/env node
'use strict';
// One browser per crawl and host, in CRAWL_DIR/chrome (CHROME_ISOLATION=crawl).
const path = require('path');
const s = require('./session.js');

if (s.isolation() !== 'crawl') {
  s.record('skipped', { output_str: 'CHROME_ISOLATION=snapshot' });
  process.exit(0);
}
s.daemon(path.join(s.CRAWL_DIR, 'chrome'), 'crawl-launch').catch((e) => {
  console.error(`ERROR: ${e.message}`);
  s.record('failed', { error: e.message });
  process.exit(1);
});
