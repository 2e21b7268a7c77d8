import type { ConversationRecord } from './conversation-record.js';

/**
 * Copies of objects whose keys users choose (secret names, metadata keys, header names, MCP
 * server names), made for the server to hold as long as the conversation lives: ordinary objects
 * (Object.prototype, the same keys in the same order) whose hidden classes never descend from `{}`'s.
 *
 * Why: V8 gives every plain object a hidden class (a "map"), reached from the empty object's map
 * by one transition per first key added. A record per conversation whose `secrets` starts with its
 * own name (TOKEN_1, TOKEN_2, ...) fills the empty object's transition table (about 1,500
 * entries); from then on, every object the server builds by adding properties to `{}` (a
 * request's fields, a log record, a response) gets a brand-new map, allocated in old space.
 * P5 measured `/alive` at several times its CPU per request with many such conversations, most
 * of it in garbage collection.
 *
 * A key list that more than one held object has (the same secret names, the same metadata keys,
 * none at all: most conversations') is held on a map shared by all of them, of the lineage of
 * HeldObject's, not `{}`'s: a small object each. At most MAX_SHARED_KEY_LISTS key lists get one,
 * so that HeldObject's own transition table never fills either. Any other (a list seen once so
 * far, or past that bound) is held in V8's dictionary mode, which adds no transition anywhere:
 * a larger object each (a hash table and a map of its own), so conversations whose key lists are
 * alike hold less heap shared than with every copy in dictionary mode.
 */
export const MAX_SHARED_KEY_LISTS = 512;
/** Key lists seen once, to be shared when seen again; forgotten when it grows past this. */
export const MAX_CANDIDATES = 4_096;

/** The root of shared copies' hidden classes: its instances have Object.prototype, and maps of their own lineage. */
const HeldObject = function HeldObject() {} as unknown as new () => object;
HeldObject.prototype = Object.prototype;

/** Per process, as V8's maps are: the key lists held on shared maps, and those seen once. */
const sharedKeyLists = new Set<string>();
const candidates = new Set<string>();

function keyListOf(keys: readonly string[]): string {
  return keys.length === 1 ? keys[0]! : keys.join('\u0000');
}

/** The key list the last userKeyed call saw for the first time (its copy then in dictionary mode), else null. */
let firstSight: string | null = null;

/** Whether the key list is (now) one held on a shared map: at its second sight, while the bound allows. */
function sharesMap(keyList: string): boolean {
  if (sharedKeyLists.has(keyList)) return true;
  if (sharedKeyLists.size >= MAX_SHARED_KEY_LISTS) return false;
  if (!candidates.has(keyList)) {
    if (candidates.size >= MAX_CANDIDATES) candidates.clear();
    candidates.add(keyList);
    firstSight = keyList;
    return false;
  }
  candidates.delete(keyList);
  sharedKeyLists.add(keyList);
  return true;
}

/** A copy to hold (see above). */
export function userKeyed<T extends object>(source: T): T {
  firstSight = null;
  const keys = Object.keys(source);
  const values = source as Record<string, unknown>;
  if (!sharesMap(keyListOf(keys))) {
    // Filled before it gets its prototype: a key `__proto__` stays an own key, as JSON.parse made it.
    const held = Object.assign(Object.create(null) as T, source);
    return Object.setPrototypeOf(held, Object.prototype) as T;
  }
  const held = new HeldObject() as Record<string, unknown>;
  for (const key of keys) {
    // An own key `__proto__` (as JSON.parse makes it) stays an own key: assigned, it would set the prototype.
    if (key === '__proto__') Object.defineProperty(held, key, { value: values[key], writable: true, enumerable: true, configurable: true });
    else held[key] = values[key];
  }
  return held as T;
}

/**
 * Records held together (start-up, ConversationIndex.addAll): per key list of their secrets or
 * metadata first seen among them, where the objects held then are (in dictionary mode, as a first
 * sight is). Usually one; more when the candidates were forgotten (MAX_CANDIDATES) between two
 * sights of the list, each of which was then a first. See shareFirstSights.
 */
export type FirstSights = Map<string, { record: ConversationRecord; field: 'secrets' | 'metadata' }[]>;

/**
 * After records held together: each whose key list was first seen among them and is shared now
 * (a later record had it too) is held again, on the shared map. The key lists most records have
 * are then shared from the first record on, not the second, without a walk of the records before
 * (an `Object.keys` of each record's secrets and metadata, felt at start-up). Past
 * MAX_SHARED_KEY_LISTS, the lists seen twice first are the ones shared.
 */
export function shareFirstSights(firstSights: FirstSights): void {
  for (const [keyList, sights] of firstSights) {
    if (!sharedKeyLists.has(keyList)) continue;
    for (const { record, field } of sights) {
      if (field === 'secrets') record.secrets = userKeyed(record.secrets);
      else if (record.metadata) record.metadata = userKeyed(record.metadata);
    }
  }
}

/** After a userKeyed call for a record held with others: where its key list was first seen, if it was. */
function noteFirstSight(together: FirstSights, record: ConversationRecord, field: 'secrets' | 'metadata'): void {
  if (firstSight === null) return;
  const sights = together.get(firstSight);
  if (sights) sights.push({ record, field });
  else together.set(firstSight, [{ record, field }]);
}

/** How many key lists are held on shared maps and how many were seen once: per process (tests, diagnostics). */
export function keyListsSeen(): { shared: number; candidates: number } {
  return { shared: sharedKeyLists.size, candidates: candidates.size };
}

/** The record's maps keyed by users, as held (see userKeyed); the record is changed in place and returned. */
export function holdUserKeyed(record: ConversationRecord): ConversationRecord {
  return hold(record, null);
}

/** As holdUserKeyed, for a record held with others (see FirstSights); shareFirstSights once all are held. */
export function holdUserKeyedTogether(record: ConversationRecord, firstSights: FirstSights): ConversationRecord {
  return hold(record, firstSights);
}

function hold(record: ConversationRecord, together: FirstSights | null): ConversationRecord {
  record.secrets = userKeyed(record.secrets);
  if (together) noteFirstSight(together, record, 'secrets');
  if (record.metadata) {
    record.metadata = userKeyed(record.metadata);
    if (together) noteFirstSight(together, record, 'metadata');
  }
  if (record.llm?.extra_headers) record.llm.extra_headers = userKeyed(record.llm.extra_headers);
  if (record.llm?.extra_body) record.llm.extra_body = userKeyed(record.llm.extra_body);
  if (record.mcp_servers) {
    const servers = userKeyed(record.mcp_servers);
    for (const [name, server] of Object.entries(servers)) {
      if ('env' in server && server.env) servers[name] = { ...server, env: userKeyed(server.env) };
      else if ('headers' in server && server.headers) servers[name] = { ...server, headers: userKeyed(server.headers) };
    }
    record.mcp_servers = servers;
  }
  return record;
}
