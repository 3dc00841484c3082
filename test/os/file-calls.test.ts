import assert from 'node:assert/strict';
import {
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
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
      const ctimeNs = fstatSync(fd, { bigint: true }).ctimeNs;
      assert.deepEqual(mine, {
        dev: node.dev,
        ino: node.ino,
        nlink: node.nlink,
        size: node.size,
        isFile: node.isFile(),
        isSymbolicLink: false,
        ctimeSec: Number(ctimeNs / 1_000_000_000n),
        // Exact through statx; derived from ctimeMs (sub-µs rounding) through node:fs.
        ctimeNsec: mine.ctimeNsec,
        birthtimeMs: node.birthtimeMs,
      });
      assert.ok(Math.abs(mine.ctimeNsec - Number(ctimeNs % 1_000_000_000n)) < 1000);
      assert.deepEqual(calls.lstat(path), mine, 'lstat of the path equals fstat of the file');
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
    // lstat reports a link as a link, never follows it, and throws Node-style errors.
    const link = calls.lstat(join(dir, 'link'));
    assert.equal(link.isSymbolicLink, true);
    assert.equal(link.isFile, false);
    assert.equal(link.ino, lstatSync(join(dir, 'link')).ino);
    mkdirSync(join(dir, 'sub'));
    assert.deepEqual(
      [calls.lstat(join(dir, 'sub')).isFile, calls.lstat(join(dir, 'sub')).isSymbolicLink],
      [false, false],
    );
    assert.throws(() => calls.lstat(join(dir, 'missing')), { code: 'ENOENT' });
    assert.throws(() => calls.lstat(join(path, 'x')), { code: 'ENOTDIR' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
