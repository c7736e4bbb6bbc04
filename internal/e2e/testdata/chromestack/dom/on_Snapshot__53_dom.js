#!/usr/bin/env node
'use strict';
const fs = require('fs');
const s = require('../chrome/session.js');

s.extract(async (page) => {
  fs.writeFileSync('output.html', await page.content());
  return 'output.html';
});
