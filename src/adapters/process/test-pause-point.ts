import type { Logger } from 'pino';

/** Tests only (AGENTD_TEST_PAUSE_AT): at the named crash point the server says so and waits forever, to be killed. */
export function testPausePoint(name: string | null, logger: Logger): ((point: string) => Promise<void>) | undefined {
  if (name === null) return undefined;
  return async (point) => {
    if (point !== name) return;
    logger.warn({ pause_point: point }, `test pause point reached: ${point}`);
    process.stdout.write(`AGENTD_TEST_PAUSED ${point}\n`);
    await new Promise<never>(() => {});
  };
}
