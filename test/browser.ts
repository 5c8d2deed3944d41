/** The dashboard tests' browser: Debian's Chromium, headless, with a fresh profile per test. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { repoRoot } from './helpers.js';

const CHROMIUM = '/usr/bin/chromium';

/** Debian's Chromium, installed on first use (a fresh CI machine has none). */
export function ensureChromium(): void {
  if (existsSync(CHROMIUM)) return;
  const r = spawnSync(path.join(repoRoot, 'scripts', 'install-browser.sh'), { stdio: 'inherit' });
  assert.equal(r.status, 0, 'scripts/install-browser.sh installs chromium');
}

/**
 * A headless Chromium with a fresh profile (launchPersistentContext passes it as --user-data-dir), closed
 * and removed when the test ends; its page, and the errors the page reports (uncaught, or logged as errors).
 */
export async function browserPage(t: TestContext): Promise<{ page: Page; pageErrors: string[] }> {
  const userDataDir = mkdtempSync(path.join(tmpdir(), 'eo-chromium-'));
  let browser: BrowserContext | undefined;
  // The profile goes once the browser has closed (it writes there until then).
  t.after(async () => {
    await browser?.close();
    rmSync(userDataDir, { recursive: true, force: true });
  });
  browser = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1400, height: 1200 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = browser.pages()[0] ?? (await browser.newPage());
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(m.text());
  });
  return { page, pageErrors };
}
