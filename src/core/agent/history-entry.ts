import type { LlmMessage, LlmMessageCodec } from './llm.js';
import { estimateTokens } from './token-estimate.js';

/** What an entry costs besides its text: the entry itself and the string's header, about. */
const ENTRY_BYTES = 64;
/** A character V8 cannot keep in a one-byte string: a text with one takes two bytes a character. */
const TWO_BYTE = /[^\x00-\xff]/;

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
  private bytes: number;
  private estimated: number;

  constructor(
    private readonly codec: LlmMessageCodec,
    message: LlmMessage,
    readonly seq: number,
    public lastSeq: number,
  ) {
    this.messageRole = message.role;
    this.kept = codec.encode(message) ?? message;
    this.bytes = sizeOf(this.kept);
    this.estimated = estimateTokens(message);
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

  /** About how many bytes of memory it holds (see sizeOf). */
  get size(): number {
    return this.bytes;
  }

  /** About how many tokens it takes in a request (see estimateTokens), counted once. */
  get tokens(): number {
    return this.estimated;
  }

  /** The message changed (a call joined its turn, an old output was cleared). */
  replace(message: LlmMessage): void {
    this.messageRole = message.role;
    this.kept = this.codec.encode(message) ?? message;
    this.bytes = sizeOf(this.kept);
    this.estimated = estimateTokens(message);
  }
}

/** Bytes a kept message takes, about: its text at one or two bytes a character (a message kept as an object: twice its JSON's length). */
function sizeOf(kept: string | LlmMessage): number {
  if (typeof kept !== 'string') return ENTRY_BYTES + 2 * JSON.stringify(kept).length;
  return ENTRY_BYTES + (TWO_BYTE.test(kept) ? 2 : 1) * kept.length;
}
