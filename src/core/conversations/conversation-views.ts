import type { Conversation } from '../schemas/conversation.js';
import type { ConversationRecord } from './conversation-record.js';
import { publicConversation } from './public-conversation.js';

/** How many views are kept (the conversations read most recently; a view is ~1 KB). */
const KEPT_VIEWS = 512;

/**
 * What clients see of a conversation (publicConversation), made once per change instead of at
 * every read: the same frozen object is handed out until the record changes (ConversationStore
 * drops its view at every transition) or its event count moves. Whoever keeps work derived from a
 * view (the HTTP layer keeps its JSON) may reuse it for as long as it is handed that same object:
 * a changed conversation always gets a new one. Only the last KEPT_VIEWS views made are kept, so
 * reading every conversation once does not hold a copy of each.
 */
export class ConversationViews {
  private readonly views = new Map<Readonly<ConversationRecord>, { eventCount: number; view: Conversation }>();

  of(record: Readonly<ConversationRecord>, eventCount: number): Conversation {
    const held = this.views.get(record);
    if (held !== undefined && held.eventCount === eventCount) return held.view;
    const view = Object.freeze(publicConversation(record, eventCount));
    this.views.delete(record);
    this.views.set(record, { eventCount, view });
    if (this.views.size > KEPT_VIEWS) this.views.delete(this.views.keys().next().value!);
    return view;
  }

  /** The record is about to change (or just did): its next read makes a new view. */
  drop(record: Readonly<ConversationRecord>): void {
    this.views.delete(record);
  }
}
