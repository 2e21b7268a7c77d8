import { NotFoundError } from '../errors.js';
import type { ConversationRecord } from '../conversations/conversation-record.js';
import type { ConversationStore } from '../conversations/conversation-store.js';
import type { NewEvent } from '../schemas/event.js';
import { gitCredentialEnv } from './git-credentials.js';
import { SecretMasker, type MaskerInSteps } from './secret-masker.js';
import { StreamingMasker } from './streaming-masker.js';

/** Told when a conversation's secrets change, so a running shell sees them at its next command. */
export type SecretsChanged = (conversationId: string, change: { set: Record<string, string>; unset: string[] }) => Promise<void>;

/**
 * A conversation's secrets: stored encrypted (by the repository), given to its shell and
 * commands as environment variables, and masked as `<secret:NAME>` in everything that leaves.
 */
export class SecretService {
  private readonly maskers = new Map<string, SecretMasker>();
  private readonly conversations: ConversationStore;
  private readonly onChange: SecretsChanged | null;

  constructor(deps: { conversations: ConversationStore; onChange?: SecretsChanged }) {
    this.conversations = deps.conversations;
    this.onChange = deps.onChange ?? null;
  }

  names(conversationId: string): string[] {
    return Object.keys(this.conversations.record(conversationId).secrets).sort();
  }

  async put(conversationId: string, secrets: Record<string, string>): Promise<string[]> {
    const record = this.conversations.record(conversationId);
    let retired = record.retired_secrets;
    for (const [name, value] of Object.entries(secrets)) {
      if (Object.hasOwn(record.secrets, name) && record.secrets[name] !== value) retired = retire(retired, name, record.secrets[name]!);
    }
    this.conversations.setSecrets(conversationId, { secrets: { ...record.secrets, ...secrets }, retired_secrets: retired });
    this.forget(conversationId);
    await this.onChange?.(conversationId, { set: this.environment(record), unset: [] });
    return this.names(conversationId);
  }

  async remove(conversationId: string, name: string): Promise<void> {
    const record = this.conversations.record(conversationId);
    if (!Object.hasOwn(record.secrets, name)) throw new NotFoundError('secret', name);
    const before = Object.keys(this.environment(record));
    const { [name]: removed, ...rest } = record.secrets;
    this.conversations.setSecrets(conversationId, { secrets: rest, retired_secrets: retire(record.retired_secrets, name, removed!) });
    this.forget(conversationId);
    const after = this.environment(record);
    await this.onChange?.(conversationId, { set: after, unset: before.filter((key) => !(key in after)) });
  }

  /** What the conversation's shell and commands get: the secrets, plus git credential config. */
  environment(record: Readonly<ConversationRecord>): Record<string, string> {
    return { ...record.secrets, ...gitCredentialEnv(Object.keys(record.secrets)) };
  }

  masker(conversationId: string): SecretMasker {
    let masker = this.maskers.get(conversationId);
    if (!masker) {
      masker = new SecretMasker(this.conversations.has(conversationId) ? maskedPairs(this.conversations.record(conversationId)) : []);
      this.maskers.set(conversationId, masker);
    }
    return masker;
  }

  maskText(conversationId: string, text: string): string {
    return this.masker(conversationId).maskText(text);
  }

  /** For the event recorder: every event is masked before it is stored. */
  readonly maskEvent = (conversationId: string, event: NewEvent): NewEvent => {
    const masker = this.masker(conversationId);
    return masker.empty ? event : masker.maskValue(event);
  };

  /** For the event recorder: streamed text is masked across pieces (null when there is nothing to mask). */
  readonly deltaMasker = (conversationId: string): StreamingMasker | null => {
    const masker = this.masker(conversationId);
    return masker.empty ? null : new StreamingMasker(masker);
  };

  forget(conversationId: string): void {
    this.maskers.delete(conversationId);
  }

  private everyMasker: SecretMasker | null = null;
  private everyRevision = -1;
  /** Conversations removed since everyMasker was made: their values stay in it, masked, until it is made again. */
  private everyGone = 0;
  /** The index prepareMaskAny is making, and the revision of the secrets it started from. */
  private preparing: { steps: MaskerInSteps; revision: number } | null = null;

  /**
   * Builds maskAny's index a slice at a time (once the server listens): built by the first log
   * line, in one go, it held the event loop for tens of ms with 10,000 conversations holding
   * secrets, and the server's first requests (a probe's /health) waited. A log line before the last
   * slice finishes it at once (what is left of it, not another index); secrets changed meanwhile are
   * added to it at its first use (catchUp).
   */
  async prepareMaskAny(): Promise<void> {
    const preparing = { steps: SecretMasker.inSteps(this.everyPair()), revision: this.conversations.secretChanges.revision };
    this.preparing = preparing;
    while (this.preparing === preparing && preparing.steps.step(MASK_ANY_SLICE)) await new Promise((resolve) => setImmediate(resolve));
    if (this.preparing === preparing) this.usePrepared();
  }

  /** The index being prepared, finished now, used unless one made meanwhile is as late. */
  private usePrepared(): void {
    const { steps, revision } = this.preparing!;
    this.preparing = null;
    if (this.everyMasker && this.everyRevision >= revision) return;
    this.everyMasker = steps.finish();
    this.everyRevision = revision;
    this.everyGone = 0;
  }

  /**
   * Masks the secret values of every conversation in a piece of text that may hold any of them
   * (the strings of a log record: the logger calls it field by field, see logger.ts). Its index
   * follows the set of values (catchUp), not a record saved for another reason.
   */
  maskAny(text: string): string {
    if (!this.everyMasker || this.everyRevision !== this.conversations.secretChanges.revision) this.catchUp();
    return this.everyMasker!.maskText(text);
  }

  /**
   * maskAny's index brought up to the secrets held: the values of each conversation added or
   * given secrets since are added to it, rather than the index made again at the next log line
   * (a walk of every conversation's secrets, at every conversation created or deleted). A removed conversation's values stay masked until the index is made again: once
   * there are more of those than 1,000 and a third of its values, or it holds twice the values it
   * was sized for.
   */
  private catchUp(): void {
    if (this.preparing) this.usePrepared();
    const revision = this.conversations.secretChanges.revision;
    const masker = this.everyMasker;
    const changed = masker && masker.size < 2 * masker.capacity ? this.conversations.secretChanges.since(this.everyRevision) : null;
    if (changed) {
      for (const id of new Set(changed)) {
        const record = this.conversations.has(id) ? this.conversations.find(id) : null;
        if (!record) this.everyGone += 1;
        else if (!record.quarantine) masker!.add(maskedPairs(record));
      }
    }
    if (!changed || this.everyGone > Math.max(MAX_GONE_KEPT, masker!.size / 3)) {
      this.everyMasker = new SecretMasker(this.everyPair());
      this.everyGone = 0;
    }
    this.everyRevision = revision;
  }

  /** Every conversation's masked values, as pairs, not a map: two conversations may hold different values under the same name. */
  private *everyPair(): Generator<readonly [string, string]> {
    for (const record of this.conversations.all()) yield* maskedPairs(record);
  }
}

/** Removed conversations whose values maskAny's index may keep masking before it is made again (see catchUp). */
const MAX_GONE_KEPT = 1000;

/** Values collected, then indexed, per turn of the event loop by prepareMaskAny. */
const MASK_ANY_SLICE = 1000;

/** How many former values a conversation keeps masking (the oldest go first). */
const MAX_RETIRED_SECRETS = 100;

/** Keeps a value the conversation no longer holds masked: it may still be in files, logs or a shell's history. */
function retire(before: readonly [string, string][] | undefined, name: string, value: string): [string, string][] {
  const retired = (before ?? []).filter(([, kept]) => kept !== value);
  retired.push([name, value]);
  return retired.slice(-MAX_RETIRED_SECRETS);
}

/** Every value masked for a conversation: its secrets, and the values they had before. */
function maskedPairs(record: Readonly<ConversationRecord>): [string, string][] {
  return [...Object.entries(record.secrets), ...(record.retired_secrets ?? [])];
}
