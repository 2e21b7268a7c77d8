import { z } from 'zod';

/** What the health and info routes answer: the shapes of /health and /info are core's (src/core/schemas/server-status.ts). */
export const Alive = z.object({ status: z.literal('ok') }).meta({ id: 'Alive' });
export { Health, Info } from '../../core/schemas/server-status.js';
