import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

/** A self-signed certificate for localhost made with openssl in `dir`, or why it could not be. */
export function selfSigned(dir: string): { cert: string; key: string } | string {
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  const made = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      '/CN=localhost',
      '-days',
      '1',
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  if (made.error !== undefined) return `openssl is not available (${made.error.message})`;
  if (made.status !== 0) return `openssl failed: ${made.stderr.toString()}`;
  return { cert, key };
}
