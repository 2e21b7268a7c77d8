import { DeliveryWorker, type DeliveryWorkerDeps } from './delivery-worker.js';
import type { SubscriptionState } from './subscription-state.js';

/**
 * Runs one delivery worker per subscription and knows them by id and by conversation. Workers
 * are independent: a slow or dead receiver holds up only its own subscription.
 */
export class WebhookDispatcher {
  private readonly workers = new Map<string, DeliveryWorker>();
  private readonly byConversation = new Map<string, Map<string, DeliveryWorker>>();
  private closed = false;

  constructor(private readonly deps: DeliveryWorkerDeps) {}

  /** Start delivering a (new or loaded) subscription. */
  add(state: SubscriptionState): DeliveryWorker {
    if (this.closed) throw new Error('webhook dispatcher is closed');
    const worker = new DeliveryWorker(state, this.deps);
    this.workers.set(state.id, worker);
    let ofConversation = this.byConversation.get(state.conversation_id);
    if (!ofConversation) {
      ofConversation = new Map();
      this.byConversation.set(state.conversation_id, ofConversation);
    }
    ofConversation.set(state.id, worker);
    worker.wake();
    return worker;
  }

  get(subscriptionId: string): DeliveryWorker | undefined {
    return this.workers.get(subscriptionId);
  }

  forConversation(conversationId: string): DeliveryWorker[] {
    return [...(this.byConversation.get(conversationId)?.values() ?? [])];
  }

  /** Events were appended to a conversation: wake its workers. Synchronous and cheap; the work happens later. */
  notify(conversationId: string): void {
    const ofConversation = this.byConversation.get(conversationId);
    if (ofConversation) for (const worker of ofConversation.values()) worker.wake();
  }

  /** Stop a subscription's deliveries at once (an attempt in flight is aborted). Its state is not saved again. */
  remove(subscriptionId: string): Promise<void> {
    const worker = this.workers.get(subscriptionId);
    if (!worker) return Promise.resolve();
    this.workers.delete(subscriptionId);
    const ofConversation = this.byConversation.get(worker.state.conversation_id);
    ofConversation?.delete(subscriptionId);
    if (ofConversation?.size === 0) this.byConversation.delete(worker.state.conversation_id);
    return worker.stop({ persist: false });
  }

  get size(): number {
    return this.workers.size;
  }

  /** Shutdown: stop every worker, abort attempts in flight and save where each one stands. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.workers.values()].map((worker) => worker.stop({ persist: true })));
    this.workers.clear();
    this.byConversation.clear();
  }
}
