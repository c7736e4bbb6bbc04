#!/usr/bin/env node
'use strict';
const s = require('../chrome/session.js');

s.extract(async (page) => {
  await page.pdf({ path: 'output.pdf', printBackground: true });
  return 'output.pdf';
});
