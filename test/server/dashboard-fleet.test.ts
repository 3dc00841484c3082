/**
 * The dashboard's Fleet card in a real browser (Debian's headless Chromium driven by
 * playwright-core, as dashboard.test.ts does): two fleet members in this process, on one table
 * prefix of the test PostgreSQL, serve a table of 4 regions, 2 each. The page of one lists both
 * members with 2 regions each, marks itself, and lists the regions it claimed; when the other
 * leaves (handing its regions over), it shows itself with all 4, without a reload. Screenshots
 * go to test-artifacts/dashboard-fleet-*.png. Skipped, saying why, where Chromium is missing.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { connect } from '../../src/client/locksmith-client.js';
import { postgresRegionStorage } from '../../src/rows/postgres-region-storage.js';
import { LocksmithServer } from '../../src/server/server.js';
import { dropStoragePrefixes, POSTGRES_URL } from '../fixtures/db-servers.js';
import { eventually, tempDir } from '../helpers.js';
import { ARTIFACTS, launchBrowser, missing, openPage, text } from './dashboard-browser.js';

const dirs = tempDir('locksmith-dashboard-fleet-');
const prefixes: string[] = [];
after(async () => {
  dirs[Symbol.dispose]();
  await dropStoragePrefixes(prefixes);
});

/** A fleet member on `prefix`, in this process, with its own data directory and dashboard. */
async function member(prefix: string, n: number): Promise<LocksmithServer> {
  const dataDir = join(dirs.path, `${prefix}-${n}`);
  mkdirSync(dataDir);
  return LocksmithServer.listen({
    dataDir,
    port: 0,
    httpPort: 0,
    openStorage: postgresRegionStorage({
      database: POSTGRES_URL,
      root: dataDir,
      tablePrefix: prefix,
    }),
    fleet: { database: POSTGRES_URL, tablePrefix: prefix, leaseMs: 2000, renewMs: 500 },
  });
}

/** The address a member joined the fleet under (what the Fleet card shows). */
function addressOf(server: LocksmithServer): string {
  const address = server.status().fleet?.address;
  assert.ok(address, 'a fleet member has an address');
  return address;
}

/** The cells of every body row of the Fleet card's `nth` table (0: members, 1: moves). */
function fleetRows(page: Page, nth: number): Promise<string[][]> {
  return page
    .locator('#fleet table')
    .nth(nth)
    .locator('tbody tr')
    .evaluateAll((trs) =>
      trs.map((tr) => Array.from(tr.querySelectorAll('td'), (td) => td.textContent ?? '')),
    );
}

/** The Fleet card's row of the member at `address`: [address, id, state, regions]. */
async function memberRow(page: Page, address: string): Promise<string[] | undefined> {
  return (await fleetRows(page, 0)).find((cells) => cells[0]?.replace(/ \(.*\)$/, '') === address);
}

describe('dashboard of a fleet member in headless Chromium', { skip: missing }, () => {
  let browser: Browser;

  before(async () => {
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
  });

  it('lists the members with their regions, marks this server, lists its moves, and shows a handover live', async () => {
    const prefix = `lsm_${randomBytes(4).toString('hex')}`;
    prefixes.push(prefix);
    let one: LocksmithServer | undefined;
    let other: LocksmithServer | undefined;
    try {
      one = await member(prefix, 0);
      other = await member(prefix, 1);
      const here = one;
      const there = other;
      const c = await connect(`locksmith://127.0.0.1:${here.port}`, { name: 'fleet-app' });
      try {
        await c.createTable('t', ['f'], { splits: ['b', 'c', 'd'] });
        const hereAddress = addressOf(here);
        const thereAddress = addressOf(there);
        // Both members serve 2 regions each, as both see it (regions and members alike).
        const split = (s: LocksmithServer) => {
          const status = s.status();
          const served = (a: string) => status.regions.filter((r) => r.server === a).length;
          const counted = (a: string) =>
            status.fleet?.members.find((m) => m.address === a && m.live)?.regions;
          return [hereAddress, thereAddress].every(
            (a) => status.regions.length === 4 && served(a) === 2 && counted(a) === 2,
          );
        };
        await eventually(
          () => split(here) && split(there),
          30_000,
          () => `2 regions each: ${JSON.stringify([here.status().regions, here.status().fleet])}`,
          100,
        );

        const { page, errors } = await openPage(browser, `http://127.0.0.1:${here.httpPort}/`);
        await page.waitForSelector('#board:not([hidden])', { timeout: 15_000 });
        await page.waitForSelector('#fleet-card', { timeout: 15_000 });
        // The page may have read a status from before the split settled: it polls on its own.
        await eventually(
          async () =>
            (await memberRow(page, hereAddress))?.[3] === '2' &&
            (await memberRow(page, thereAddress))?.[3] === '2',
          15_000,
          'both members with 2 regions on the page',
          100,
        );
        const mine = await memberRow(page, hereAddress);
        assert.equal(mine?.[0], `${hereAddress} (this server)`);
        assert.equal(mine?.[1], here.status().fleet?.id);
        assert.equal(mine?.[2], 'live');
        const theirs = await memberRow(page, thereAddress);
        assert.equal(theirs?.[0], thereAddress, 'the other member is not marked');
        assert.equal(theirs?.[2], 'live');
        const card = await text(page, '#fleet-card');
        assert.match(card, /^Fleet\b/);
        assert.ok(card.includes(hereAddress));
        assert.match(card, /regions\s+4\b/);
        assert.match(card, /served by nobody\s+0\b/);
        const moves = await fleetRows(page, 1);
        assert.ok(
          moves.some((m) => m[2] === 'claimed'),
          `claimed moves in ${JSON.stringify(moves)}`,
        );
        // The Regions card names the other member's regions and has no rows for them here.
        const regions = await text(page, '#regions');
        assert.ok(regions.includes(thereAddress), regions);
        assert.ok(regions.includes('—'), regions);
        assert.match(
          await text(page, '#servers'),
          /fleet member/,
          'Servers seen points to the Fleet card',
        );
        await page.screenshot({ path: join(ARTIFACTS, 'dashboard-fleet.png'), fullPage: true });

        // The other member leaves, handing its regions over: the page shows it without a reload.
        await page.evaluate('window.marker = 42');
        other = undefined;
        await there.close();
        let shown: string[][] = [];
        await eventually(
          async () => {
            shown = await fleetRows(page, 0);
            return (await memberRow(page, hereAddress))?.[3] === '4';
          },
          30_000,
          () => `this server with 4 regions: ${JSON.stringify(shown)}`,
          100,
        );
        const gone = await memberRow(page, thereAddress);
        assert.ok(gone === undefined || gone[3] === '0', `the other member: ${gone}`);
        await eventually(
          async () => /served by nobody\s+0\b/.test(await text(page, '#fleet-card')),
          15_000,
          'no region unserved',
          100,
        );
        assert.equal((await fleetRows(page, 1))[0]?.[2], 'claimed', 'newest move first');
        assert.doesNotMatch(await text(page, '#regions'), /nobody/);
        assert.equal(await page.evaluate('window.marker'), 42);
        await page.screenshot({
          path: join(ARTIFACTS, 'dashboard-fleet-handover.png'),
          fullPage: true,
        });
        assert.deepEqual(errors, []);
        await page.close();
      } finally {
        await c.close();
      }
    } finally {
      await other?.close();
      await one?.close();
    }
  });
});
