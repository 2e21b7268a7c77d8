import fs from 'node:fs';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { tempDir } from './agentd.js';

/**
 * Debian's Chromium driven by playwright-core (no browser download). `.ci/run` installs it;
 * elsewhere the dashboard tests skip with one line. The background-networking flags keep
 * Chromium from dialling out (the machine has no network; refused connections slow it down).
 */
export const CHROMIUM_PATH = process.env.AGENTD_TEST_CHROMIUM ?? '/usr/bin/chromium';
export const chromiumMissing = fs.existsSync(CHROMIUM_PATH) ? null : `skipped: no Chromium at ${CHROMIUM_PATH} (apt-get install chromium, or set AGENTD_TEST_CHROMIUM)`;

export interface TestBrowser {
  context: BrowserContext;
  /** A fresh tab (its own sessionStorage: signed out). */
  newPage(): Promise<Page>;
  dir: string;
  /** Saves a screenshot of every open page into `dir` and prints the paths. */
  screenshots(label: string): Promise<string[]>;
  /** Closes the open tabs: each holds two SSE connections, and Chromium allows six per host. */
  closePages(): Promise<void>;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  const dir = tempDir('agentd-browser-');
  const profile = path.join(dir, 'profile');
  fs.mkdirSync(profile);
  // A fresh profile each run (playwright passes it as --user-data-dir).
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    acceptDownloads: true,
    viewport: { width: 1280, height: 800 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const pages: Page[] = [];
  return {
    context,
    dir,
    async newPage() {
      const page = await context.newPage();
      pages.push(page);
      return page;
    },
    async screenshots(label) {
      const saved: string[] = [];
      for (const [index, page] of pages.entries()) {
        if (page.isClosed()) continue;
        const file = path.join(dir, `${label.replace(/[^a-z0-9]+/gi, '-')}-${index}.png`);
        try {
          await page.screenshot({ path: file, fullPage: false, timeout: 5000 });
          saved.push(file);
        } catch {
          // a page that cannot render any more has nothing to show
        }
      }
      if (saved.length) process.stderr.write(`dashboard test screenshots: ${saved.join(' ')}\n`);
      return saved;
    },
    async closePages() {
      for (const page of pages.splice(0)) await page.close().catch(() => {});
    },
    async close() {
      await context.close();
    },
  };
}
