import assert from 'node:assert/strict';
import {
  constants,
  fstatSync,
  mkdtempSync,
  readSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileCalls } from '../../src/os/file-calls.js';

const FLAGS = constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW;

test('fileCalls: open/pread/fstat/close agree with node:fs, and fstat numbers equal fs.Stats', () => {
  const dir = mkdtempSync(join(tmpdir(), 'locksmith-calls-'));
  try {
    const calls = fileCalls();
    const path = join(dir, 'a');
    writeFileSync(path, 'hello\n');
    const fd = calls.open(path, FLAGS, 0o644);
    try {
      const mine = calls.fstat(fd);
      const node = fstatSync(fd);
      assert.deepEqual(mine, {
        dev: node.dev,
        ino: node.ino,
        nlink: node.nlink,
        size: node.size,
        isFile: node.isFile(),
        birthtimeMs: node.birthtimeMs,
      });
      const buf = Buffer.alloc(16);
      assert.equal(calls.pread(fd, buf, 16, 1), 5);
      assert.equal(buf.toString('latin1', 0, 5), 'ello\n');
      // An ordinary descriptor: node:fs can use it too.
      assert.equal(readSync(fd, buf, 0, 16, 0), 6);
      assert.equal(fstatSync(fd).mode & 0o777, node.mode & 0o777);
    } finally {
      calls.close(fd);
    }
    assert.throws(() => calls.close(fd), { code: 'EBADF' });
    assert.throws(() => calls.fstat(fd), { code: 'EBADF' });
    assert.throws(() => calls.open(join(dir, 'missing', 'x'), FLAGS, 0o644), { code: 'ENOENT' });
    symlinkSync(path, join(dir, 'link'));
    assert.throws(() => calls.open(join(dir, 'link'), FLAGS, 0o644), { code: 'ELOOP' });
    assert.throws(() => calls.open(`${path}\0x`, FLAGS, 0o644));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
