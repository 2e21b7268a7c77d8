/**
 * `agentd/client`: a typed client of agentd's HTTP contract for Node 20+ and browsers (fetch and
 * an SSE parser; no server code). Types come from the server's own zod schemas.
 */
export { AgentdClient, type UploadFile } from './agentd-client.js';
export { AgentdConnectionError, AgentdError } from './agentd-error.js';
export type { ClientOptions } from './http-transport.js';
export type { FirehoseOptions, StreamItem, StreamOptions } from './event-stream.js';
export type { ApprovalDecision, QueryOptions, RunResult } from './query.js';
export { isPersisted } from './query.js';
export type * from './types.js';
