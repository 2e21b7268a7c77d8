// node --allow-natives-syntax --expose-gc v8-map-probe.mjs <conversations dir> <secret key file> [raw]
// Loads the conversation records of a data dir with the built repository, holds them as the
// store does (holdUserKeyed; `raw`: as loaded), and prints, after a full collection, whether two
// objects built as the server builds its own (`{}`, then a property) share V8's hidden class.
import fs from 'node:fs';
import { FileConversationRepository } from '../../dist/adapters/file-conversation-repository.js';
import { holdUserKeyed } from '../../dist/core/conversations/user-keyed.js';
import { SecretBox } from '../../dist/core/secrets/secret-box.js';

const [dir, keyFile, mode] = process.argv.slice(2);
const box = new SecretBox(SecretBox.keyFromText(fs.readFileSync(keyFile, 'utf8').trim()));
const { records } = await new FileConversationRepository(dir, box).loadAll();
const held = mode === 'raw' ? records : records.map(holdUserKeyed);
globalThis.gc();
const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)');
function built() {
  const out = {};
  out.probe_field_of_this_test = 1;
  return out;
}
process.stdout.write(JSON.stringify({ records: held.length, shared: sameMap(built(), built()) }));
