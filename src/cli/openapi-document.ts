import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApp } from '../app.js';
import { composeServices } from '../compose.js';
import { loadConfig } from '../config.js';
import { createLogger } from '../logger.js';

/** The OpenAPI document the server serves, generated without listening (for `npm run openapi` and its test). */
export async function generateOpenApi(): Promise<Record<string, unknown> & { paths?: Record<string, unknown> }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-openapi-'));
  try {
    const config = loadConfig({ AGENTD_DATA_DIR: dataDir, AGENTD_MASTER_KEY: 'openapi-generation', AGENTD_LOG_LEVEL: 'silent' });
    const services = await composeServices(config, createLogger({ level: 'silent' }));
    const app = await buildApp(services);
    await app.ready();
    const document = app.swagger() as unknown as Record<string, unknown>;
    await app.close();
    await services.close();
    return JSON.parse(JSON.stringify(document));
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
