import type { LlmMessage, LlmMessageCodec } from './llm.js';

/**
 * One message of the history with the seqs of the events it was folded from (first and last),
 * kept as its codec's text (see LlmMessageCodec): encoded once, when it enters the history, sent
 * as that text at every request, and decoded only when something reads the message itself (a
 * condensation). One text instead of an object graph also keeps a long history small.
 */
export class HistoryEntry {
  /** The codec's text, or the message itself when the codec keeps it as an object. */
  private kept: string | LlmMessage;
  private messageRole: LlmMessage['role'];

  constructor(
    private readonly codec: LlmMessageCodec,
    message: LlmMessage,
    readonly seq: number,
    public lastSeq: number,
  ) {
    this.messageRole = message.role;
    this.kept = codec.encode(message) ?? message;
  }

  get role(): LlmMessage['role'] {
    return this.messageRole;
  }

  /** The message (decoded anew at each read: cheap callers read `role` or `item`). */
  get message(): LlmMessage {
    return typeof this.kept === 'string' ? this.codec.decode(this.kept) : this.kept;
  }

  /** What a request carries: the text, or the message kept as an object. */
  get item(): string | LlmMessage {
    return this.kept;
  }

  /** The message changed (a call joined its turn). */
  replace(message: LlmMessage): void {
    this.messageRole = message.role;
    this.kept = this.codec.encode(message) ?? message;
  }
}
