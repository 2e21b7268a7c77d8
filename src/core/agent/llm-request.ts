import type { CondenseResult, CondenseTrigger } from './condenser.js';
import type { ConversationHistory } from './conversation-history.js';
import type { OutputRequirement } from './structured-output.js';
import { LlmError, type EncodedMessages, type LlmMessage, type LlmUserPart, type LlmClient, type LlmRequest, type LlmResponse, type LlmRetry, type LlmSettings, type LlmToolSchema, type LlmUsage } from './llm.js';

/** What a run's LLM requests need: the history, the client, and the condenser that keeps the history in the window. */
export interface LlmRequestContext {
  history: ConversationHistory;
  llm: LlmClient;
  toolSchemas: LlmToolSchema[];
  delta(text: string): void;
  /** The reasoning as it streams (none: not streamed). */
  reasoningDelta?(text: string): void;
  onUsage(usage: LlmUsage): Promise<void>;
  onLlmRetry?: (retry: LlmRetry) => void;
  condenser: RunCondenser;
  /** Reads a workdir image of a user message (base64) when a request is sent; none: such images are described, not sent. */
  readImage?: (path: string) => Promise<string>;
}

/** Condensation as a run sees it (the runtime knows the settings, the hooks and a pending POST /condense). */
export interface RunCondenser {
  /** Why the history should be condensed before the next request, or null. */
  due(): CondenseTrigger | null;
  run(trigger: CondenseTrigger): Promise<CondenseResult>;
}

/**
 * One request over the history as it stands, answer streamed as deltas, usage recorded. The
 * history is condensed first when it is due; when the provider refuses the prompt as too long,
 * it is condensed and the request is made once more. `noTools`: the tools stay in the request
 * (the cached prompt prefix holds) but the model may not call them.
 */
export async function askLlm(context: LlmRequestContext, options: { settings: LlmSettings; signal: AbortSignal; noTools?: boolean; output?: OutputRequirement | null }): Promise<LlmResponse> {
  const output = options.output ?? null;
  const due = context.condenser.due();
  if (due) await context.condenser.run(due);
  if (options.signal.aborted) throw options.signal.reason;
  const request = async () => {
    const response = await context.llm.complete(await withHistory(context, {
      settings: options.settings,
      tools: output?.toolSchema ? [...context.toolSchemas, output.toolSchema] : context.toolSchemas,
      ...(output?.responseFormat ? { responseFormat: output.responseFormat } : {}),
      ...(options.noTools ? { toolChoice: 'none' as const } : {}),
      signal: options.signal,
      onTextDelta: (text) => context.delta(text),
      // `llm.reasoning.show: false`: the reasoning is neither streamed nor recorded.
      ...(context.reasoningDelta && options.settings.reasoning?.show !== false ? { onReasoningDelta: (text: string) => context.reasoningDelta!(text) } : {}),
      ...(context.onLlmRetry ? { onRetry: context.onLlmRetry } : {}),
    }));
    await context.onUsage(response.usage);
    return response;
  };
  try {
    return await request();
  } catch (error) {
    if (!(error instanceof LlmError) || error.code !== 'llm_context_exceeded' || options.signal.aborted) throw error;
    const condensed = await context.condenser.run('context_exceeded');
    if (condensed.kind === 'blocked') throw new LlmError(error.code, `${error.message} Condensing the history was blocked by a PreCompact hook: ${condensed.reason}`, error.status);
    if (condensed.kind === 'nothing') throw new LlmError(error.code, `${error.message} There was nothing left to condense (see condenser.keep_first and keep_last).`, error.status);
    return request();
  }
}

/**
 * The history for a request. A client whose codec the history keeps its messages in gets them
 * as they are kept (`encoded`: nothing encoded again, `messages` decoded only if read); any other
 * client gets the messages. Workdir images of user messages are read either way.
 */
async function withHistory(context: LlmRequestContext, rest: Omit<LlmRequest, 'messages' | 'encoded'>): Promise<LlmRequest> {
  const history = context.history;
  if (context.llm.codec === undefined || context.llm.codec !== history.codec) return { ...rest, messages: await withImages(context, history.snapshot()) };
  const kept = history.encoded();
  const encoded: EncodedMessages = { codec: kept.codec, items: await withImages(context, kept.items) };
  let decoded: LlmMessage[] | undefined;
  const messages = () => (decoded ??= encoded.items.map((item) => (typeof item === 'string' ? encoded.codec.decode(item) : item)));
  return Object.defineProperty({ ...rest, encoded }, 'messages', { get: messages, enumerable: true }) as LlmRequest;
}

/** Workdir images of user messages read for the request (once per run); one that cannot be read is described instead. Texts pass as they are. */
async function withImages<T extends string | LlmMessage>(context: LlmRequestContext, messages: readonly T[]): Promise<T[]> {
  if (!messages.some((message) => typeof message !== 'string' && message.role === 'user' && Array.isArray(message.content))) return messages as T[];
  let cache = imageCaches.get(context);
  if (!cache) imageCaches.set(context, (cache = new Map()));
  const images = cache;
  return Promise.all(
    messages.map(async (message): Promise<T> => {
      if (typeof message === 'string' || message.role !== 'user' || !Array.isArray(message.content)) return message;
      const content = await Promise.all(
        message.content.map(async (part): Promise<LlmUserPart> => {
          if (part.type !== 'image' || part.data || !part.path) return part;
          const path = part.path;
          if (!context.readImage) return { type: 'text', text: `[image ${path}: not available here]` };
          let read = images.get(path);
          if (!read) {
            read = context.readImage(path).catch((error: unknown) => new Error((error as Error).message));
            images.set(path, read);
          }
          const data = await read;
          return typeof data === 'string' ? { ...part, data } : { type: 'text', text: `[image ${path}: no longer readable (${data.message})]` };
        }),
      );
      return { role: 'user', content } as T;
    }),
  );
}

/** Per run (its request context): each workdir image is read once. */
const imageCaches = new WeakMap<LlmRequestContext, Map<string, Promise<string | Error>>>();
