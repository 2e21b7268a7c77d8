import { z } from 'zod';
import { SecretsMap } from '../../core/schemas/conversation.js';

/** The bodies and answers of the secret routes. */
export const SecretNames = z.object({ names: z.array(z.string()).describe('Secret names; values are never returned.') }).meta({ id: 'SecretNames' });
export const PutSecrets = z.object({ secrets: SecretsMap }).strict().meta({ id: 'PutSecrets' });
