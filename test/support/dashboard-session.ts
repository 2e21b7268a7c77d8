/**
 * The set-up the end-to-end dashboard tests share: a real Chromium, the scripted fake LLM (text
 * streamed in small chunks, so the page sees deltas) and the real server configured to use it,
 * started once per file; after each test the tabs close (a failing test saves screenshots first)
 * and the LLM's script is emptied.
 */
import { afterAll, afterEach, beforeAll } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { startServer, type TestServer } from './agentd.js';
import { chromiumMissing, launchBrowser, type TestBrowser } from './browser.js';

export interface DashboardSession {
  browser: TestBrowser;
  llm: FakeLlm;
  server: TestServer;
}

/** Registers the hooks and returns the session, filled in once `beforeAll` has run. */
export function useDashboardSession(testFile: string): DashboardSession {
  if (chromiumMissing) process.stderr.write(`${testFile} ${chromiumMissing}\n`);
  const session = {} as DashboardSession;
  beforeAll(async () => {
    if (chromiumMissing) return;
    session.browser = await launchBrowser();
    session.llm = await startFakeLlm({ script: [], textChunkSize: 6 });
    session.server = await startServer({ env: { AGENTD_LLM_MODEL: 'fake-model', AGENTD_LLM_BASE_URL: session.llm.url, AGENTD_LLM_API_KEY: 'fake-key' } });
  }, 60_000);
  afterAll(async () => {
    await session.browser?.close();
    await session.server?.close();
    await session.llm?.close();
  });
  afterEach(async (context) => {
    session.llm?.setScript([]);
    if (context.task.result?.state === 'fail') await session.browser?.screenshots(context.task.name);
    await session.browser?.closePages();
  });
  return session;
}
