#!/usr/bin/env node
'use strict';
const s = require('../chrome/session.js');

s.extract(async (page) => {
  await page.screenshot({ path: 'screenshot.png', fullPage: true });
  return 'screenshot.png';
});
