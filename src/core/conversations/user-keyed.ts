import type { ConversationRecord } from './conversation-record.js';

/**
 * A copy of an object whose keys users choose (secret names, metadata keys, header names, MCP
 * server names), made for the server to hold as long as the conversation lives: an object in
 * V8's dictionary mode, with the usual prototype.
 *
 * Why: V8 gives every plain object a hidden class (a "map"), reached from the empty object's map
 * by one transition per first key added. A record per conversation whose `secrets` starts with its
 * own name (TOKEN_1, TOKEN_2, ...) fills the empty object's transition table (about 1,500
 * entries); from then on, every object the server builds by adding properties to `{}` (a
 * request's fields, a log record, a response) gets a brand-new map, allocated in old space.
 * P5 measured `/alive` at 3 to 4 times its CPU per request with 10,000 such conversations, most
 * of it in garbage collection. An object in dictionary mode adds no transition.
 */
export function userKeyed<T extends object>(source: T): T {
  // Filled before it gets its prototype: a key `__proto__` stays an own key, as JSON.parse made it.
  const held = Object.assign(Object.create(null) as T, source);
  return Object.setPrototypeOf(held, Object.prototype) as T;
}

/** The record's maps keyed by users, as held (see userKeyed); the record is changed in place and returned. */
export function holdUserKeyed(record: ConversationRecord): ConversationRecord {
  record.secrets = userKeyed(record.secrets);
  if (record.metadata) record.metadata = userKeyed(record.metadata);
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
