/**
 * Reasoning in Chat Completions answers, as each provider sends it: `reasoning_content`
 * (DeepSeek, xAI, Qwen/DashScope, vLLM and SGLang reasoning parsers), `reasoning` (Groq,
 * OpenRouter, Ollama), `reasoning_details` (OpenRouter: typed items, with signatures or
 * encrypted data, kept verbatim) and `content` as an array of parts (Mistral's magistral models:
 * `thinking` parts beside `text` parts). Reasoning goes back on later requests as the provider
 * wants it (see `sendBackOf` in chat-request-shape.ts).
 */
import type { LlmReasoning } from '../../core/agent/llm.js';

/** The reasoning members of a streamed delta or of a whole message. */
export interface ReasoningSource {
  content?: unknown;
  reasoning_content?: unknown;
  reasoning?: unknown;
  reasoning_details?: unknown;
}

/** A `content` field read: its text, its thinking, and the parts neither (kept as they came). */
export interface ContentRead {
  text: string;
  thinking: string;
  refusal: string;
  otherParts: unknown[];
}

/**
 * `content` as text whatever its shape: a string; an array of parts (`text` joined, `thinking`
 * parts' text as reasoning, `refusal` parts as a refusal); a single part object. Anything else is
 * kept apart, never turned into text.
 */
export function readContent(content: unknown): ContentRead {
  const read: ContentRead = { text: '', thinking: '', refusal: '', otherParts: [] };
  if (content === null || content === undefined) return read;
  if (typeof content === 'string') {
    read.text = content;
    return read;
  }
  for (const part of Array.isArray(content) ? content : [content]) {
    if (typeof part === 'string') read.text += part;
    else if (!part || typeof part !== 'object') continue;
    else if (isType(part, 'text') && typeof (part as { text?: unknown }).text === 'string') read.text += (part as { text: string }).text;
    else if (isType(part, 'thinking')) read.thinking += thinkingText((part as { thinking?: unknown }).thinking);
    else if (isType(part, 'refusal') && typeof (part as { refusal?: unknown }).refusal === 'string') read.refusal += (part as { refusal: string }).refusal;
    else read.otherParts.push(part);
  }
  return read;
}

/** Mistral's `thinking`: a list of `{type: 'text', text}` chunks (or a string). */
function thinkingText(thinking: unknown): string {
  if (typeof thinking === 'string') return thinking;
  if (!Array.isArray(thinking)) return '';
  return thinking.map((chunk) => (typeof chunk === 'string' ? chunk : typeof (chunk as { text?: unknown })?.text === 'string' ? (chunk as { text: string }).text : '')).join('');
}

function isType(part: object, type: string): boolean {
  return (part as { type?: unknown }).type === type;
}

/**
 * The reasoning of one answer, piece by piece: `add` takes each delta (or the whole message)
 * and returns the reasoning text it brought. `reasoning_details` items are merged by `index`
 * (strings concatenated, other fields as last sent), and kept verbatim for the way back.
 */
export class ReasoningAccumulator {
  private text = '';
  private readonly details: Record<string, unknown>[] = [];
  private readonly detailByIndex = new Map<number, Record<string, unknown>>();

  add(source: ReasoningSource, fromContent = ''): string {
    let piece = '';
    if (typeof source.reasoning_content === 'string') piece += source.reasoning_content;
    else if (typeof source.reasoning === 'string') piece += source.reasoning;
    const detailsText = this.addDetails(source.reasoning_details);
    // OpenRouter sends the same text as `reasoning` and in `reasoning_details`: counted once.
    if (piece === '' && typeof source.reasoning_content !== 'string' && typeof source.reasoning !== 'string') piece += detailsText;
    piece += fromContent;
    this.text += piece;
    return piece;
  }

  /** What was reasoned, or null when nothing was. */
  result(origin: LlmReasoning['origin']): LlmReasoning | null {
    if (this.text === '' && this.details.length === 0) return null;
    return {
      text: this.text,
      ...(origin ? { origin } : {}),
      ...(this.details.length > 0 ? { providerData: { reasoning_details: this.details } } : {}),
    };
  }

  private addDetails(details: unknown): string {
    if (!Array.isArray(details)) return '';
    let text = '';
    for (const item of details) {
      if (!item || typeof item !== 'object') continue;
      const detail = item as Record<string, unknown>;
      if (typeof detail.text === 'string') text += detail.text;
      else if (typeof detail.summary === 'string') text += detail.summary;
      const index = typeof detail.index === 'number' ? detail.index : undefined;
      const known = index === undefined ? undefined : this.detailByIndex.get(index);
      if (!known) {
        const copy = { ...detail };
        this.details.push(copy);
        if (index !== undefined) this.detailByIndex.set(index, copy);
        continue;
      }
      for (const [key, value] of Object.entries(detail)) {
        const before = known[key];
        known[key] = typeof before === 'string' && typeof value === 'string' && (key === 'text' || key === 'summary' || key === 'data') ? before + value : value;
      }
    }
    return text;
  }
}

/** Whether the reasoning's opaque payload may go to this model (a signature is only good for the model that made it). */
export function sameOrigin(reasoning: LlmReasoning, model: string): boolean {
  return reasoning.origin === undefined || reasoning.origin.model === model;
}

/** OpenRouter's `reasoning_details` as received, if the reasoning carries them. */
export function reasoningDetailsOf(reasoning: LlmReasoning): unknown[] | undefined {
  const data = reasoning.providerData as { reasoning_details?: unknown } | undefined;
  return Array.isArray(data?.reasoning_details) ? data.reasoning_details : undefined;
}
