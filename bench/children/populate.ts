/**
 * Fills a data dir with conversations as clients leave them (an LLM with a key, one secret, a few
 * events each), through an in-process server that is closed again, ready for another to load.
 * Its own process, so that the benchmark that asked keeps a small, quiet heap.
 *
 *   populate.mjs --data-dir D --conversations N --events E --secret-names shared|distinct
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { startServer } from '../../test/support/agentd.js';
import { createConversation } from '../support/conversations.js';

const { values } = parseArgs({
  options: { 'data-dir': { type: 'string' }, conversations: { type: 'string' }, events: { type: 'string' }, 'secret-names': { type: 'string', default: 'shared' } },
});
const conversations = Number(values.conversations);
const events = Number(values.events);
const server = await startServer({ dataDir: values['data-dir']!, listen: false });
try {
  for (let i = 0; i < conversations; i++) {
    const secretName = values['secret-names'] === 'distinct' ? `TOKEN_${i}` : 'GITHUB_TOKEN';
    const id = await createConversation(server.services, {
      title: `Conversation ${i}`,
      llm: { model: 'gpt-4o-mini', api_key: `sk-bench-${i}`, base_url: 'http://127.0.0.1:9/v1' },
      secrets: { [secretName]: randomBytes(12).toString('base64url') },
      metadata: { ticket: `BENCH-${i}` },
    });
    await server.services.conversations.append(id, { kind: 'message', source: 'user', role: 'user', content: `Fix issue ${i}.` });
    for (let j = 1; j < events; j++) {
      await server.services.conversations.append(id, { kind: 'message', source: 'agent', role: 'assistant', content: `Step ${j} of conversation ${i}: looked at the code.`, run_id: null });
    }
  }
} finally {
  await server.close();
}
