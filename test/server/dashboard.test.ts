/**
 * The operators' dashboard in a real browser: Debian's headless Chromium driven by
 * playwright-core (no browser download). A standalone server with a table, a session holding a
 * row lock and another waiting for it: the page shows the role, the table, the held lock's
 * owner, the waiter, a deadlock caught, a rate chart with points, and updates in place when a
 * new lock is taken. With a token, it shows nothing until the operator types it. Screenshots go
 * to test-artifacts/dashboard-*.png. Skipped, saying why, where Chromium is missing.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { connect } from '../../src/client/locksmith-client.js';
import { DeadlockError, Put } from '../../src/rows/index.js';
import { LocksmithServer } from '../../src/server/server.js';
import { LOCKS_LISTED, SESSIONS_LISTED } from '../../src/server/status-lists.js';
import { SharedFileLocker } from '../../src/store/shared-file-locker.js';
import { eventually, tempDir } from '../helpers.js';
import { ARTIFACTS, launchBrowser, missing, openPage, text } from './dashboard-browser.js';
import { RawClient } from './raw-client.js';
import { client, startServer } from './server-fixture.js';

/** Waits until the page shows `role` (it polls /status by itself: no reload). */
async function roleShown(page: Page, role: string): Promise<void> {
  await eventually(
    async () => (await text(page, '#role')).toLowerCase() === role,
    20_000,
    `role ${role}`,
    50,
  );
}

describe('dashboard in headless Chromium', { skip: missing }, () => {
  let browser: Browser;

  before(async () => {
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
  });

  it('shows role, tables, held locks, waiters, a deadlock and a rate chart, and updates live', async () => {
    await using server = await startServer({ httpPort: 0, leasePeriodMs: 60_000 });
    await using a = await client(server, { name: 'holder-app' });
    await using b = await client(server, { name: 'waiter-app' });
    await using c = await client(server, { name: 'third-app' });
    // A client name is the client's to choose: the page shows it as text, never as markup.
    const hostile = '<img src=x onerror="window.pwned=1">';
    await using h = await client(server, { name: hostile });
    await h.listTables();
    await a.createTable('accounts', ['balance', 'audit']);
    await a.createTable('events', ['f'], { splits: ['m'] });
    await a.splitTable('events', 't');
    const accounts = a.table('accounts');
    for (let i = 0; i < 20; i++) await accounts.put(new Put(`user${i}`).add('balance', 'v', '1'));
    const held = await accounts.lockRow('alice');
    const waiting = b.table('accounts').lockRow('alice', { waitMs: 120_000 });
    waiting.catch(() => undefined); // awaited below; a failure before that must not mask it
    // A deadlock: c holds carol, a waits for carol, then c asks for alice (held by a).
    const carol = await c.table('accounts').lockRow('carol');
    const aWaits = accounts.lockRow('carol', { waitMs: 120_000 });
    await eventually(() => server.metrics().lockWaiters === 2, 10_000, 'two waiters');
    await assert.rejects(
      c.table('accounts').lockRow('alice', { waitMs: 120_000 }),
      (err) => err instanceof DeadlockError,
    );
    await carol.close();
    const aGot = await aWaits;
    await aGot.close();

    const { page, errors } = await openPage(browser, `http://127.0.0.1:${server.httpPort}/`);
    await page.waitForSelector('#board:not([hidden])', { timeout: 15_000 });
    assert.equal((await text(page, '#role')).toLowerCase(), 'standalone');
    const tables = await text(page, '#tables');
    assert.match(tables, /accounts/);
    assert.match(tables, /balance, audit|audit, balance/);
    const regions = await text(page, '#regions');
    assert.match(regions, /events\s*\(start\)\s*m\b/);
    assert.match(regions, /events\s*m\s*t\b/);
    assert.match(regions, /events\s*t\s*\(end\)/);
    const locks = await text(page, '#locks');
    assert.match(locks, /alice/);
    assert.match(locks, /holder-app/);
    // A token is printed as its digits, as the header, the CLI and the logs print tokens.
    assert.ok(locks.includes(String(held.token)), `${held.token} in ${locks}`);
    const waits = await text(page, '#waits');
    assert.match(waits, /waiter-app/);
    assert.match(waits, /alice/);
    assert.match(waits, /holder-app/, 'the waiter row names the holder');
    assert.match(await text(page, '#deadlocks'), /Deadlocks caught: 1\b/);
    const sessions = await text(page, '#sessions');
    assert.match(sessions, /waiter-app/);
    assert.ok(sessions.includes(hostile), 'the hostile name is shown as text');
    assert.equal(await page.locator('#sessions img').count(), 0);
    assert.equal(await page.evaluate('window.pwned'), undefined);
    assert.match(await text(page, '#handlers'), /handler/);
    const points = await page.locator('#rate-chart circle.pt').count();
    assert.ok(points >= 1, `the chart has ${points} points`);
    const calls = await page
      .locator('#rate-chart circle.pt')
      .evaluateAll((cs) => cs.reduce((n, c) => n + Number(c.getAttribute('data-calls')), 0));
    assert.ok(calls >= 20, `the chart counts ${calls} calls`);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-standalone.png'), fullPage: true });

    // Live: a new lock appears without a reload (the marker set on this document survives).
    await page.evaluate('window.marker = 42');
    const bob = await accounts.lockRow('bob');
    await page.locator('#locks', { hasText: 'bob' }).waitFor({ timeout: 15_000 });
    assert.equal(await page.evaluate('window.marker'), 42);
    // And the waiter leaves the list once it has the row.
    await held.close();
    const got = await waiting;
    await page.locator('#waits', { hasText: 'Nobody waits' }).waitFor({ timeout: 15_000 });
    await page.screenshot({
      path: join(ARTIFACTS, 'dashboard-standalone-live.png'),
      fullPage: true,
    });
    assert.deepEqual(errors, []);
    await page.close();
    await got.close();
    await bob.close();
  });

  it('with a token, shows nothing until the operator types it (conformance M9)', async () => {
    await using server = await startServer({ httpPort: 0, token: 'sekret-token-42' });
    await using a = await client(server, { name: 'gated-app', token: 'sekret-token-42' });
    await a.createTable('secret_table', ['f']);
    const lock = await a.table('secret_table').lockRow('row-1');

    const { page, errors } = await openPage(browser, `http://127.0.0.1:${server.httpPort}/`);
    await page.waitForSelector('#gate:not([hidden])', { timeout: 15_000 });
    assert.equal(await page.locator('#board').isHidden(), true);
    const before = await page.content();
    assert.doesNotMatch(before, /secret_table|gated-app|row-1/);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-token-gate.png'), fullPage: true });

    await page.fill('#token-input', 'wrong-token');
    await page.click('#token-submit');
    await page.locator('#gate-message', { hasText: 'refused' }).waitFor({ timeout: 15_000 });
    assert.equal(await page.locator('#board').isHidden(), true);
    assert.doesNotMatch(await page.content(), /secret_table/);

    await page.fill('#token-input', 'sekret-token-42');
    await page.click('#token-submit');
    await page.waitForSelector('#board:not([hidden])', { timeout: 15_000 });
    assert.match(await text(page, '#tables'), /secret_table/);
    assert.match(await text(page, '#locks'), /gated-app/);
    assert.equal(
      await page.evaluate("sessionStorage.getItem('locksmith.dashboard.token')"),
      'sekret-token-42',
    );
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-token-shown.png'), fullPage: true });
    assert.deepEqual(errors, []);
    await page.close();
    await lock.close();
  });

  it('on a master and a slave of one data directory: roles, the master a slave names, peers, and the takeover live (conformance M9)', async () => {
    using data = tempDir('locksmith-dashboard-ha-');
    const ha = () => ({
      locker: new SharedFileLocker({ directory: data.path, acquireIntervalMs: 200 }),
      keepAlivePeriodMs: 200,
    });
    const first = await LocksmithServer.listen({
      dataDir: data.path,
      port: 0,
      httpPort: 0,
      durability: 'none',
      ha: ha(),
    });
    let second: LocksmithServer | undefined;
    try {
      await eventually(() => first.role === 'master', 15_000, 'first server master');
      second = await LocksmithServer.listen({
        dataDir: data.path,
        port: 0,
        httpPort: 0,
        durability: 'none',
        ha: ha(),
      });
      await using c = await connect(`locksmith://127.0.0.1:${first.port}`, { name: 'ha-app' });
      await c.createTable('ha_table', ['f']);
      const masterAddress = `127.0.0.1:${first.port}`;

      const master = await openPage(browser, `http://127.0.0.1:${first.httpPort}/`);
      await roleShown(master.page, 'master');
      assert.match(await text(master.page, '#tables'), /ha_table/);
      const firstToken = String((first.status().ha as { token: number }).token);
      assert.ok((await text(master.page, '#overview')).includes(firstToken));
      assert.ok((await text(master.page, '#headline')).includes(`token ${firstToken}`));
      await master.page.screenshot({
        path: join(ARTIFACTS, 'dashboard-master.png'),
        fullPage: true,
      });

      const slave = await openPage(browser, `http://127.0.0.1:${second.httpPort}/`);
      await roleShown(slave.page, 'slave');
      // The slave names the master and lists it among the servers it has seen.
      await eventually(
        async () => (await text(slave.page, '#headline')).includes(`master at ${masterAddress}`),
        15_000,
        'the slave names the master',
      );
      await eventually(
        async () => (await text(slave.page, '#servers')).includes(masterAddress),
        15_000,
        'the slave lists the master among the servers seen',
      );
      assert.match(await text(slave.page, '#tables'), /serves no tables/);
      await slave.page.screenshot({ path: join(ARTIFACTS, 'dashboard-slave.png'), fullPage: true });

      // The master stops: the slave's page turns to master, without a reload, with its history.
      await first.close();
      await roleShown(slave.page, 'master');
      assert.match(await text(slave.page, '#failovers'), /master/);
      assert.match(await text(slave.page, '#tables'), /ha_table/);
      await slave.page.screenshot({
        path: join(ARTIFACTS, 'dashboard-slave-took-over.png'),
        fullPage: true,
      });
      assert.deepEqual(
        master.errors.filter((e) => !/Failed to fetch|ERR_CONNECTION/.test(e)),
        [],
      );
      assert.deepEqual(slave.errors, []);
      await master.page.close();
      await slave.page.close();
    } finally {
      await second?.close();
      await first.close();
    }
  });

  it('says how many sessions and held locks there are where the status lists only some', async () => {
    await using server = await startServer({ httpPort: 0 });
    await using admin = await client(server, { name: 'admin-app' });
    await admin.createTable('many', ['f']);
    const n = Math.max(SESSIONS_LISTED, LOCKS_LISTED) + 10;
    const raws: RawClient[] = [];
    try {
      for (let i = 0; i < n; i++) {
        const { raw } = await RawClient.session(server.port, { client: `many-${i}` });
        raws.push(raw);
        await raw.call('lockRow', ['many', Buffer.from(`r${i}`), null]);
      }
      const { page, errors } = await openPage(browser, `http://127.0.0.1:${server.httpPort}/`);
      await page.waitForSelector('#board:not([hidden])', { timeout: 15_000 });
      assert.match(
        await text(page, '#sessions'),
        new RegExp(`showing ${SESSIONS_LISTED} of ${n + 1}\\b`),
      );
      assert.match(await text(page, '#locks'), new RegExp(`showing ${LOCKS_LISTED} of ${n}\\b`));
      const overview = await text(page, '#overview');
      assert.match(overview, new RegExp(`sessions\\s+${n + 1}\\b`));
      assert.match(overview, new RegExp(`row locks held\\s+${n}\\b`));
      assert.equal(await page.locator('#sessions tbody tr').count(), SESSIONS_LISTED);
      assert.equal(await page.locator('#locks tbody tr').count(), LOCKS_LISTED);
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-cut-lists.png'), fullPage: true });
      assert.deepEqual(errors, []);
      await page.close();
    } finally {
      for (const raw of raws) raw.destroy();
    }
  });
});
