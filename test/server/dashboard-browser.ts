// Not a test: the system Chromium (Debian's, driven by playwright-core; nothing downloads a
// browser) for the dashboard tests, which skip with `missing` where it is not installed.
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { repoRoot } from '../helpers.js';

export const CHROMIUM = process.env.LOCKSMITH_CHROMIUM ?? '/usr/bin/chromium';
/** Where the tests leave screenshots (ignored by git). */
export const ARTIFACTS = join(repoRoot, 'test-artifacts');
/** Why the browser tests skip, or undefined where Chromium is there. */
export const missing = existsSync(CHROMIUM)
  ? undefined
  : `skipped: no Chromium at ${CHROMIUM} (apt-get install chromium, or set LOCKSMITH_CHROMIUM); the dashboard test needs a real browser`;

/** Headless Chromium (without its sandbox when run as root, which it refuses otherwise). */
export async function launchBrowser(): Promise<Browser> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
  });
}

/** A page that fails the test on any script error or refused resource (CSP included). */
export async function openPage(
  browser: Browser,
  url: string,
): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`));
  page.on('console', (msg) => {
    // The 401 of the token gate is logged by Chromium as a failed resource: expected there.
    if (msg.type() === 'error' && !/401/.test(msg.text())) errors.push(`console: ${msg.text()}`);
  });
  await page.goto(url);
  return { page, errors };
}

/** The text an operator sees (rendered: hidden parts excluded). */
// biome-ignore lint/performance/useDomNodeTextContent: the rendered text is what is asserted
export const text = (page: Page, selector: string) => page.locator(selector).innerText();
