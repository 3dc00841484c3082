/**
 * The status port as the dashboard needs it, without a browser: the page and its assets (no
 * inline code, strict security headers, no CORS), read-only methods, the DNS-rebinding check
 * of the Host header, the token gate, and what `/status` adds for the page: the rate history,
 * lock waits with their holders, deadlocks caught with the last cycle, session lease remaining.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { describe, it } from 'node:test';
import { DeadlockError, Put } from '../../src/rows/index.js';
import { CallStats, RATE_BUCKETS, RATE_INTERVAL_MS } from '../../src/server/call-stats.js';
import { dashboardScript } from '../../src/server/dashboard-assets.js';
import { DASHBOARD_HTML } from '../../src/server/dashboard-page.js';
import { allowedHost } from '../../src/server/http-guard.js';
import { eventually } from '../helpers.js';
import { client, startServer } from './server-fixture.js';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A raw request (fetch may not set Host). */
function get(
  port: number,
  path: string,
  options: { method?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method: options.method ?? 'GET', headers: options.headers },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('dashboard over HTTP', () => {
  it('serves the page, script and style with strict headers, no inline code, no CORS', async () => {
    await using server = await startServer({ httpPort: 0 });
    const port = server.httpPort as number;
    for (const [path, type] of [
      ['/', /text\/html/],
      ['/dashboard.js', /text\/javascript/],
      ['/dashboard.css', /text\/css/],
      ['/status', /application\/json/],
      ['/metrics', /text\/plain/],
    ] as const) {
      const res = await get(port, path);
      assert.equal(res.status, 200, path);
      assert.match(String(res.headers['content-type']), type, path);
      const csp = String(res.headers['content-security-policy']);
      assert.match(csp, /default-src 'self'/, path);
      assert.match(csp, /script-src 'self'(;|$)/, path);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, path);
      assert.match(csp, /frame-ancestors 'none'/, path);
      assert.equal(res.headers['x-frame-options'], 'DENY', path);
      assert.equal(res.headers['x-content-type-options'], 'nosniff', path);
      assert.equal(res.headers['cache-control'], 'no-store', path);
      assert.equal(res.headers['referrer-policy'], 'no-referrer', path);
      for (const name of Object.keys(res.headers))
        assert.doesNotMatch(name, /^access-control-/, `${path}: no CORS header`);
    }
    // The page holds no code nor data of its own: its script comes from /dashboard.js.
    assert.doesNotMatch(DASHBOARD_HTML, /<script(?![^>]*\ssrc=)[^>]*>/);
    assert.doesNotMatch(DASHBOARD_HTML, /\sstyle=|\son[a-z]+=/);
    assert.match(DASHBOARD_HTML, /<script type="module" src="\/dashboard\.js"><\/script>/);
    // The script writes text, never HTML, and calls nothing but GET /status. What is served is
    // the compiled dashboard-client.ts, without its source-map comment.
    const script = dashboardScript();
    assert.equal((await get(port, '/dashboard.js')).body, script);
    assert.doesNotMatch(script, /sourceMappingURL/);
    assert.doesNotMatch(script, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(/);
    assert.deepEqual(script.match(/fetch\('[^']*'/g), ["fetch('/status'"]);
  });

  it('serves GET and HEAD only, changes nothing, and answers 404 elsewhere (conformance M9)', async () => {
    await using server = await startServer({ httpPort: 0 });
    const port = server.httpPort as number;
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      for (const path of ['/', '/status', '/dashboard.js']) {
        const res = await get(port, path, { method });
        assert.equal(res.status, 405, `${method} ${path}`);
        assert.equal(res.headers.allow, 'GET, HEAD');
        assert.equal(res.headers['access-control-allow-origin'], undefined);
      }
    }
    const head = await get(port, '/', { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.body, '');
    assert.equal((await get(port, '/admin')).status, 404);
    assert.equal((await get(port, '/status/../x')).status, 404);
  });

  it('refuses a Host that is not an IP literal, localhost or the listening host (DNS rebinding), except for /metrics', async () => {
    await using server = await startServer({ httpPort: 0 });
    const port = server.httpPort as number;
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'LOCALHOST', `[::1]:${port}`]) {
      assert.equal((await get(port, '/status', { headers: { host } })).status, 200, host);
    }
    for (const host of [
      `attacker.example:${port}`,
      'attacker.example',
      `localhost.attacker.example:${port}`,
      `127.0.0.1.nip.io:${port}`,
      `localhost:${port}x`,
    ]) {
      const res = await get(port, '/', { headers: { host } });
      assert.equal(res.status, 421, host);
      assert.match(res.body, /Host header/);
      assert.equal((await get(port, '/status', { headers: { host } })).status, 421, host);
    }
    // A scraper may name the server as it likes: /metrics holds only counts.
    const scraped = await get(port, '/metrics', { headers: { host: `locksmith-1:${port}` } });
    assert.equal(scraped.status, 200);
    assert.match(scraped.body, /^locksmith_sessions /m);
    assert.equal(allowedHost('db1.internal:7421', 'db1.internal'), true, 'the configured host');
    assert.equal(allowedHost('db1.internal:7421', '0.0.0.0'), false);
    assert.equal(allowedHost('[fe80::1]', '::'), true);
    assert.equal(allowedHost('[nope]:80', '::'), false);
    assert.equal(allowedHost(undefined, '127.0.0.1'), false, 'no Host header');
    assert.equal(allowedHost('', '127.0.0.1'), false);
  });

  it('with a token: the page loads, its data needs the token (conformance M9)', async () => {
    await using server = await startServer({ httpPort: 0, token: 'tok-dash' });
    const port = server.httpPort as number;
    assert.equal((await get(port, '/')).status, 200);
    assert.equal((await get(port, '/dashboard.js')).status, 200);
    assert.equal((await get(port, '/status')).status, 401);
    assert.equal((await get(port, '/metrics')).status, 401);
    const wrong = await get(port, '/status', { headers: { authorization: 'Bearer tok-dashX' } });
    assert.equal(wrong.status, 401);
    const right = await get(port, '/status', { headers: { authorization: 'Bearer tok-dash' } });
    assert.equal(right.status, 200);
    assert.equal(typeof JSON.parse(right.body).rates, 'object');
  });

  it('status has the rate history, lock waits with holders, deadlocks and session lease remaining', async () => {
    await using server = await startServer({ httpPort: 0, sessionLeaseMs: 30_000 });
    await using a = await client(server, { name: 'alpha' });
    await using b = await client(server, { name: 'beta' });
    await a.createTable('t', ['f']);
    for (let i = 0; i < 7; i++) await a.table('t').put(new Put(`r${i}`).add('f', 'q', 'v'));
    const r1 = await a.table('t').lockRow('r1');
    const r2 = await b.table('t').lockRow('r2');
    const aWaits = a.table('t').lockRow('r2', { waitMs: 60_000 });
    aWaits.catch(() => undefined);
    await eventually(() => server.metrics().lockWaiters === 1, 10_000, 'alpha waiting');
    await assert.rejects(
      b.table('t').lockRow('r1', { waitMs: 60_000 }),
      (err) => err instanceof DeadlockError,
    );
    const res = await get(server.httpPort as number, '/status');
    const status = JSON.parse(res.body) as {
      rates: { intervalMs: number; now: number; buckets: { at: number; calls: number }[] };
      waits: {
        table: string;
        row: string;
        waiter: { client: string };
        holder: { client: string };
      }[];
      waiting: number;
      deadlocks: {
        detected: number;
        last: {
          table: string;
          cycle: { waiter: { client: string; session: string }; row: string }[];
        };
      };
      sessions: { client: string; leaseMs: number; leaseRemainingMs: number }[];
    };
    assert.equal(status.rates.intervalMs, RATE_INTERVAL_MS);
    const counted = status.rates.buckets.reduce((n, x) => n + x.calls, 0);
    assert.ok(counted >= 10, `the rate history counts ${counted} calls`);
    assert.ok(status.rates.buckets.every((x) => x.at % RATE_INTERVAL_MS === 0));
    assert.equal(status.waiting, 1);
    assert.equal(status.waits.length, 1);
    assert.deepEqual(
      [status.waits[0]?.table, status.waits[0]?.row, status.waits[0]?.waiter.client],
      ['t', 'r2', 'alpha'],
    );
    assert.equal(status.waits[0]?.holder.client, 'beta');
    assert.equal(status.deadlocks.detected, 1);
    assert.equal(status.deadlocks.last.table, 't');
    assert.deepEqual(
      status.deadlocks.last.cycle.map((s) => [s.waiter.client, s.row]),
      [
        ['beta', 'r1'],
        ['alpha', 'r2'],
      ],
    );
    // Labels only: a session id never appears whole.
    for (const step of status.deadlocks.last.cycle) assert.match(step.waiter.session, /^.{6}…$/);
    for (const s of status.sessions) {
      assert.equal(s.leaseMs, 30_000);
      assert.ok(s.leaseRemainingMs > 0 && s.leaseRemainingMs <= 30_000, `${s.leaseRemainingMs}`);
    }
    await r2.close();
    await (await aWaits).close();
    await r1.close();
  });

  it('the rate history is bounded: at most 10 minutes of 5 s buckets, oldest first', () => {
    const stats = new CallStats();
    for (let i = 0; i < 1000; i++) stats.record('put', i % 10 !== 0);
    const { buckets, intervalMs, now } = stats.rates();
    assert.equal(intervalMs, RATE_INTERVAL_MS);
    assert.ok(buckets.length >= 1 && buckets.length <= RATE_BUCKETS);
    assert.equal(
      buckets.reduce((n, b) => n + b.calls, 0),
      1000,
    );
    assert.equal(
      buckets.reduce((n, b) => n + b.errors, 0),
      100,
    );
    const last = buckets[buckets.length - 1];
    assert.ok(last !== undefined && last.at <= now && now < last.at + intervalMs);
  });
});
