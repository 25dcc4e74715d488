// Writes and reads a file in a fresh temp dir, as real test suites do.
// The dir is left in place on purpose: the suite checks that nothing
// appears outside the project (the sandbox's temp dir is private).
'use strict';
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'x-'));
const file = path.join(dir, 'data.json');
fs.writeFileSync(file, JSON.stringify({ answer: 42 }));
assert.strictEqual(JSON.parse(fs.readFileSync(file, 'utf8')).answer, 42);

fs.mkdtemp(path.join(os.tmpdir(), 'x-'), (err, d) => {
  assert.ifError(err);
  fs.writeFileSync(path.join(d, 'async.txt'), 'ok');
  assert.strictEqual(fs.readFileSync(path.join(d, 'async.txt'), 'utf8'), 'ok');
  console.log('npm test: passed');
});
