import { NotFoundError } from '../errors.js';
import type { ConversationRecord } from '../conversations/conversation-record.js';
import type { ConversationService } from '../conversations/conversation-service.js';
import type { NewEvent } from '../schemas/event.js';
import { gitCredentialEnv } from './git-credentials.js';
import { SecretMasker } from './secret-masker.js';
import { StreamingMasker } from './streaming-masker.js';

/** Told when a conversation's secrets change, so a running shell sees them at its next command. */
export type SecretsChanged = (conversationId: string, change: { set: Record<string, string>; unset: string[] }) => Promise<void>;

/**
 * A conversation's secrets: stored encrypted (by the repository), given to its shell and
 * commands as environment variables, and masked as `<secret:NAME>` in everything that leaves.
 */
export class SecretService {
  private readonly maskers = new Map<string, SecretMasker>();
  private onChange: SecretsChanged | null = null;

  constructor(private readonly conversations: ConversationService) {}

  setChangeListener(listener: SecretsChanged): void {
    this.onChange = listener;
  }

  names(conversationId: string): string[] {
    return Object.keys(this.conversations.record(conversationId).secrets).sort();
  }

  async put(conversationId: string, secrets: Record<string, string>): Promise<string[]> {
    const record = this.conversations.record(conversationId);
    for (const [name, value] of Object.entries(secrets)) {
      if (Object.hasOwn(record.secrets, name) && record.secrets[name] !== value) retire(record, name, record.secrets[name]!);
    }
    record.secrets = { ...record.secrets, ...secrets };
    this.conversations.save(record);
    this.forget(conversationId);
    await this.onChange?.(conversationId, { set: this.environment(record), unset: [] });
    return this.names(conversationId);
  }

  async remove(conversationId: string, name: string): Promise<void> {
    const record = this.conversations.record(conversationId);
    if (!Object.hasOwn(record.secrets, name)) throw new NotFoundError('secret', name);
    const before = Object.keys(this.environment(record));
    const { [name]: removed, ...rest } = record.secrets;
    retire(record, name, removed!);
    record.secrets = rest;
    this.conversations.save(record);
    this.forget(conversationId);
    const after = this.environment(record);
    await this.onChange?.(conversationId, { set: after, unset: before.filter((key) => !(key in after)) });
  }

  /** What the conversation's shell and commands get: the secrets, plus git credential config. */
  environment(record: ConversationRecord): Record<string, string> {
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
    this.everyMasker = null;
  }

  private everyMasker: SecretMasker | null = null;
  private everyRevision = -1;

  /** Masks the secret values of every conversation (for log lines, which belong to none in particular). */
  maskAny(text: string): string {
    if (!this.everyMasker || this.everyRevision !== this.conversations.revision) {
      this.everyRevision = this.conversations.revision;
      // Pairs, not a map: two conversations may hold different values under the same name.
      const all: [string, string][] = [];
      for (const record of this.conversations.all()) all.push(...maskedPairs(record));
      this.everyMasker = new SecretMasker(all);
    }
    return this.everyMasker.maskText(text);
  }
}

/** How many former values a conversation keeps masking (the oldest go first). */
const MAX_RETIRED_SECRETS = 100;

/** Keeps a value the conversation no longer holds masked: it may still be in files, logs or a shell's history. */
function retire(record: ConversationRecord, name: string, value: string): void {
  const retired = (record.retired_secrets ?? []).filter(([, kept]) => kept !== value);
  retired.push([name, value]);
  record.retired_secrets = retired.slice(-MAX_RETIRED_SECRETS);
}

/** Every value masked for a conversation: its secrets, and the values they had before. */
function maskedPairs(record: ConversationRecord): [string, string][] {
  return [...Object.entries(record.secrets), ...(record.retired_secrets ?? [])];
}
