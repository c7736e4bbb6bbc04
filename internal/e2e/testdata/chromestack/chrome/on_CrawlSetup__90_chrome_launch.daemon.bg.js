#!/usr/bin/env node
'use strict';
// One browser per crawl and host, in CRAWL_DIR/chrome (CHROME_ISOLATION=crawl).
const s = require('./session.js');

s.launcher('crawl', s.CRAWL_DIR);
