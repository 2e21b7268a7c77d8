// node --allow-natives-syntax --expose-gc v8-map-probe.mjs <conversations dir> <secret key file> [raw]
// Loads the conversation records of a data dir with the built repository, holds them as the
// store does (holdUserKeyedTogether, then shareFirstSights; `raw`: as loaded), and prints, after a
// full collection, for how many of PROBES property names two objects built as the server builds
// its own (`{}`, then that property) share V8's hidden class: each that does took one of the free
// entries left in `{}`'s transition table.
//
// A full collection before the load too: objects of the module loading that are garbage by then
// hold entries of that table until a collection clears them. Without it, whether one happened
// during the load decided the answer (in about one run of fifteen, 14 entries were free after the
// raw load, enough for the single property this probe tried before).
import fs from 'node:fs';
import { FileConversationRepository } from '../../dist/adapters/files/file-conversation-repository.js';
import { holdUserKeyedTogether, shareFirstSights } from '../../dist/core/conversations/user-keyed.js';
import { SecretBox } from '../../dist/core/secrets/secret-box.js';

const [dir, keyFile, mode] = process.argv.slice(2);
const box = new SecretBox(SecretBox.keyFromText(fs.readFileSync(keyFile, 'utf8').trim()));
globalThis.gc();
const { records } = await new FileConversationRepository(dir, box).loadAll();
// Held together, as ConversationIndex.addAll holds the records a start loads.
const firstSights = new Map();
const held = mode === 'raw' ? records : records.map((record) => holdUserKeyedTogether(record, firstSights));
if (mode !== 'raw') shareFirstSights(firstSights);
globalThis.gc();
const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)');
const PROBES = 64;
const built = new Function('name', 'const out = {}; out[name] = 1; return out;');
let shared = 0;
for (let i = 0; i < PROBES; i++) if (sameMap(built(`probe_field_${i}`), built(`probe_field_${i}`))) shared++;
process.stdout.write(JSON.stringify({ records: held.length, shared, of: PROBES }));
