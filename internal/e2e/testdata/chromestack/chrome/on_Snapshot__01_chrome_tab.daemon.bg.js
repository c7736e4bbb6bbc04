#!/usr/bin/env node
'use strict';
// The snapshot's tab in the session's browser: its files (cdp_url.txt,
// target_id.txt, and chrome.pid naming the browser, as abx-plugins do)
// are written in SNAP_DIR/chrome before the first line.
const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');
const s = require('./session.js');

async function main() {
  const home = path.join(s.isolation() === 'snapshot' ? s.SNAP_DIR : s.CRAWL_DIR, 'chrome');
  const cdpFile = path.join(home, 'cdp_url.txt');
  if (!fs.existsSync(cdpFile)) throw new Error(`no browser: ${cdpFile} missing (chrome launch hook must run first)`);
  const cdpUrl = fs.readFileSync(cdpFile, 'utf8').trim();
  const browser = await puppeteer.connect({ browserWSEndpoint: cdpUrl, defaultViewport: { width: 1024, height: 768 } });
  const page = await browser.newPage();
  const id = await s.targetId(page);
  const dir = path.join(s.SNAP_DIR, 'chrome');
  fs.mkdirSync(dir, { recursive: true });
  if (home !== dir) {
    s.writeAtomic(path.join(dir, 'chrome.pid'), fs.readFileSync(path.join(home, 'chrome.pid'), 'utf8'));
    s.writeAtomic(path.join(dir, 'cdp_url.txt'), cdpUrl);
  }
  s.writeAtomic(path.join(dir, 'target_id.txt'), id);
  s.event('tab', cdpUrl);
  console.log('chrome tab opened');
  // The tab lives until the seal's SIGTERM. The launcher is stopped at the
  // same time and may take the browser down first: the connection then
  // closes, and the tab ends the same way instead of leaving Node's event
  // loop empty (an exit without a record).
  let ended = false;
  const end = async (close) => {
    if (ended) return;
    ended = true;
    s.record('succeeded', { output_str: 'target_id.txt' });
    if (close) {
      const closing = page.close().then(() => browser.disconnect());
      await Promise.race([closing.catch(() => {}), new Promise((r) => setTimeout(r, 2000))]);
    }
    process.exit(0);
  };
  browser.on('disconnected', () => end(false));
  process.on('SIGTERM', () => end(true));
  setInterval(() => {}, 1 << 30);
}

s.main(main);
