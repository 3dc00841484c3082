import { promises as fsp, mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * `mkdir -p` that fails at once with the OS's reason. Node's `mkdir(…, { recursive: true })`
 * spins forever at 100% CPU where a directory cannot be created although its parent exists
 * and mkdir says ENOENT (`/proc/x`): it creates the parent (EEXIST), retries the child, and
 * loops. Here each level is created with a plain mkdir, at most twice (once before its parent
 * exists, once after), so any failure is thrown as is: the OS error (`ENOENT`, `EACCES`,
 * `EROFS`, `ENOTDIR`, or `EEXIST` when a non-directory stands at the path).
 */
export function makeDirectoriesSync(dir: string): void {
  const path = resolve(dir);
  try {
    mkdirSync(path);
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && isDirectorySync(path)) return;
    if (code !== 'ENOENT' || dirname(path) === path) throw err;
  }
  makeDirectoriesSync(dirname(path));
  try {
    mkdirSync(path);
  } catch (err) {
    // Created meanwhile by someone else: fine. Anything else (ENOENT again) is final.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST' && isDirectorySync(path)) return;
    throw err;
  }
}

/** The asynchronous {@link makeDirectoriesSync}. */
export async function makeDirectories(dir: string): Promise<void> {
  const path = resolve(dir);
  try {
    await fsp.mkdir(path);
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && (await isDirectory(path))) return;
    if (code !== 'ENOENT' || dirname(path) === path) throw err;
  }
  await makeDirectories(dirname(path));
  try {
    await fsp.mkdir(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST' && (await isDirectory(path))) return;
    throw err;
  }
}

function isDirectorySync(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await fsp.stat(path)).isDirectory();
  } catch {
    return false;
  }
}
