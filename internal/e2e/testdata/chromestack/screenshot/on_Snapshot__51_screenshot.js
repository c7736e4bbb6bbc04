#!/usr/bin/env node
'use strict';
const s = require('../chrome/session.js');

s.extract(async (page) => {
  // Headless Chromium shows one tab of a browser at a time: a screenshot of
  // a hidden tab (another page's tab opened later in the crawl's shared
  // browser) waits for a frame that never comes. Show this one first.
  await page.bringToFront();
  await page.screenshot({ path: 'screenshot.png', fullPage: true });
  return 'screenshot.png';
});
