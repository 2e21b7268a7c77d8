import type { AgentEvent } from '../schemas/event.js';

/** An event as stored: the parsed value and the exact JSON line it was written as. */
export interface StoredEvent {
  event: AgentEvent;
  json: string;
}
