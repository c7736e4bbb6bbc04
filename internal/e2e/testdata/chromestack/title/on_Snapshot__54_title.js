#!/usr/bin/env node
'use strict';
const fs = require('fs');
const s = require('../chrome/session.js');

s.extract(async (page) => {
  const title = await page.title();
  fs.writeFileSync('title.txt', title);
  return title;
});
