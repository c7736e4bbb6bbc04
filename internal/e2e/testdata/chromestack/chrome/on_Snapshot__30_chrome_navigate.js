#!/usr/bin/env node
'use strict';
// Loads the URL in the session's tab; fails at once without a session.
const fs = require('fs');
const s = require('./session.js');

s.extract(async (page) => {
  const res = await page.goto(s.url(), { waitUntil: 'load', timeout: 30000 });
  fs.writeFileSync('navigation.json', JSON.stringify({ url: page.url(), status: res ? res.status() : 0 }));
  return 'navigation.json';
});
