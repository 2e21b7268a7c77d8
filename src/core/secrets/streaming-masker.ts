import type { SecretMasker } from './secret-masker.js';

/**
 * Masks text that arrives in pieces (the LLM's streamed deltas) as if it had arrived whole: a
 * secret value split across pieces is still masked, and so is a longer one that contains a
 * shorter one. What could still become a secret is held back until a later piece settles it, or
 * until `flush` at the end of the stream.
 */
export class StreamingMasker {
  private held = '';

  constructor(private readonly masker: SecretMasker) {}

  /** The masked text that can go out now (possibly empty). */
  push(piece: string): string {
    const text = this.held + piece;
    const settled = this.masker.settledLength(text);
    this.held = text.slice(settled);
    return this.masker.maskText(text.slice(0, settled));
  }

  /** The stream ended: what was held back, masked. */
  flush(): string {
    const rest = this.masker.maskText(this.held);
    this.held = '';
    return rest;
  }
}
