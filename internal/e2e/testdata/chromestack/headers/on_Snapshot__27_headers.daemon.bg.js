#!/usr/bin/env node
'use strict';
// Listens on the session's tab before the navigation (its first line says
// the listener is attached) and records the main document's headers.
const fs = require('fs');
const s = require('../chrome/session.js');

async function main() {
  const { browser, page } = await s.tab();
  page.on('response', async (res) => {
    if (!res.request().isNavigationRequest() || res.frame() !== page.mainFrame() || res.url().startsWith('about:')) return;
    fs.writeFileSync('headers.json', JSON.stringify({ url: res.url(), status: res.status(), headers: res.headers() }));
    s.record('succeeded', { output_str: 'headers.json' });
    await browser.disconnect();
    process.exit(0);
  });
  console.log('listening for the main document');
  process.on('SIGTERM', () => {
    s.record('failed', { error: 'no main document response before the seal' });
    process.exit(0);
  });
}

s.main(main);
