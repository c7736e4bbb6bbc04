'use strict';
// What the test's browser hooks share: where a Chrome session's files
// live, how a hook reaches the snapshot's tab, and the hook protocol
// (ArchiveResult records on stdout, logs on stderr).
const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');

const SNAP_DIR = process.env.SNAP_DIR || process.cwd();
const CRAWL_DIR = process.env.CRAWL_DIR || SNAP_DIR;
const NO_SESSION = 'No Chrome session found (chrome plugin must run first)';

function isolation() {
  return String(process.env.CHROME_ISOLATION || 'crawl').toLowerCase() === 'snapshot' ? 'snapshot' : 'crawl';
}

function url() {
  const a = process.argv.find((x) => x.startsWith('--url='));
  return a ? a.slice('--url='.length) : '';
}

function record(status, extra) {
  process.stdout.write(JSON.stringify({ type: 'ArchiveResult', status, ...(extra || {}) }) + '\n');
}

// event appends a line for the test: "WHAT PID DETAIL".
function event(what, detail) {
  if (process.env.E2E_EVENTS) {
    fs.appendFileSync(process.env.E2E_EVENTS, `${what} ${process.pid} ${detail || '-'}\n`);
  }
}

// writeAtomic writes a session file whole or not at all.
function writeAtomic(file, text) {
  fs.writeFileSync(file + '.tmp', text);
  fs.renameSync(file + '.tmp', file);
}

// launch starts Chromium with its profile in dir and writes chrome.pid and
// cdp_url.txt there before returning.
async function launch(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROME_BINARY || 'chromium',
    headless: true,
    userDataDir: path.join(dir, 'profile'),
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--hide-scrollbars'],
    handleSIGINT: false, handleSIGTERM: false, handleSIGHUP: false,
  });
  writeAtomic(path.join(dir, 'chrome.pid'), String(browser.process().pid));
  writeAtomic(path.join(dir, 'cdp_url.txt'), browser.wsEndpoint());
  return browser;
}

// daemon runs a launcher: the browser in dir, a first line once its files
// exist, and on SIGTERM the browser closed and the hook's record.
async function daemon(dir, what) {
  const browser = await launch(dir);
  event(what, browser.wsEndpoint());
  console.log('chrome session started');
  process.on('SIGTERM', async () => {
    try {
      await browser.close();
    } finally {
      for (const f of ['cdp_url.txt', 'chrome.pid']) fs.rmSync(path.join(dir, f), { force: true });
      record('succeeded', { output_str: 'chrome session closed' });
      process.exit(0);
    }
  });
}

// main runs a hook's body; an error fails it with the message.
function main(fn) {
  fn().catch((e) => {
    console.error(`ERROR: ${e.message}`);
    record('failed', { error: e.message });
    process.exit(1);
  });
}

// launcher is a launch hook: the browser of mode ('crawl' or 'snapshot')
// in base/chrome, or skipped in the other mode, as abx-plugins' are.
function launcher(mode, base) {
  if (isolation() !== mode) {
    record('skipped', { output_str: `CHROME_ISOLATION=${isolation()}` });
    process.exit(0);
  }
  main(() => daemon(path.join(base, 'chrome'), `${mode}-launch`));
}

async function targetId(page) {
  const s = await page.createCDPSession();
  const { targetInfo } = await s.send('Target.getTargetInfo');
  await s.detach();
  return targetInfo.targetId;
}

// session reads the snapshot's session files, failing at once with
// abx-plugins' message when they are missing.
function session() {
  const dir = path.join(SNAP_DIR, 'chrome');
  const read = (f) => fs.readFileSync(path.join(dir, f), 'utf8').trim();
  if (!fs.existsSync(path.join(dir, 'cdp_url.txt')) || !fs.existsSync(path.join(dir, 'target_id.txt'))) {
    throw new Error(NO_SESSION);
  }
  return { cdpUrl: read('cdp_url.txt'), targetId: read('target_id.txt') };
}

// tab connects to the session's browser and returns it with the tab.
async function tab() {
  const s = session();
  const browser = await puppeteer.connect({ browserWSEndpoint: s.cdpUrl, defaultViewport: null });
  for (const page of await browser.pages()) {
    // Other pages' tabs of a shared browser may close meanwhile.
    const id = await targetId(page).catch(() => '');
    if (id === s.targetId) return { browser, page };
  }
  await browser.disconnect();
  throw new Error(`${NO_SESSION}: tab ${s.targetId} is gone`);
}

// extract runs an extractor on the session's tab: fn(page) returns the
// record's output_str.
function extract(fn) {
  (async () => {
    let browser;
    try {
      const t = await tab();
      browser = t.browser;
      const out = await fn(t.page);
      record('succeeded', { output_str: out });
    } catch (e) {
      console.error(`ERROR: ${e.message}`);
      record('failed', { error: e.message });
      process.exitCode = 1;
    } finally {
      if (browser) await browser.disconnect();
    }
  })();
}

module.exports = { SNAP_DIR, CRAWL_DIR, isolation, url, record, event, writeAtomic, main, launcher, targetId, session, tab, extract };
