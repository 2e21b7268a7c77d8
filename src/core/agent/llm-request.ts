import type { CondenseResult, CondenseTrigger } from './condenser.js';
import type { ConversationHistory } from './conversation-history.js';
import type { ToolContext } from '../tools/tool.js';
import { saveFullOutput } from '../tools/agent-area.js';
import { clearOldOutputs } from './output-clearing.js';
import type { OutputRequirement } from './structured-output.js';
import { estimateToolTokens } from './token-estimate.js';
import { LlmError, type EncodedMessages, type LlmMessage, type LlmUserPart, type LlmClient, type LlmRequest, type LlmResponse, type LlmSettings, type LlmToolSchema, type LlmUsage } from './llm.js';
import { requestHooks, type LlmRequestEvents } from './llm-request-events.js';

/** What a run's LLM requests need: the history, the client, and the condenser that keeps the history in the window. */
export interface LlmRequestContext extends LlmRequestEvents {
  history: ConversationHistory;
  llm: LlmClient;
  toolSchemas: LlmToolSchema[];
  delta(text: string): void;
  /** The reasoning as it streams (none: not streamed). */
  reasoningDelta?(text: string): void;
  /** `model`: the one that answered. */
  onUsage(usage: LlmUsage, model?: string): Promise<void>;
  condenser: RunCondenser;
  /** Reads a workdir image of a user message (base64) when a request is sent; none: such images are described, not sent. */
  readImage?: (path: string) => Promise<string>;
  /** Where old tool outputs are saved when the overflow ladder clears them (the run's tools' context). */
  toolContext?: ToolContext;
}

/** The next request's size as estimated before it is sent (token-estimate.ts). */
export interface RequestEstimate {
  /** The whole request: messages and tools. */
  tokens: number;
  /** The part no condensation takes out: the system prompt and the tools. */
  fixed: number;
  /** The provider's count over the estimate at the run's last request (1 until one is known; kept within 1–2). */
  ratio: number;
}

/** Condensation as a run sees it (the runtime knows the settings, the hooks and a pending POST /condense). */
export interface RunCondenser {
  /** Why the history should be condensed before the next request, or null. */
  due(estimate: RequestEstimate): CondenseTrigger | null;
  /** `shrink`: the provider refused a request even so: the tail and the summary's input are smaller at each step. */
  run(trigger: CondenseTrigger, options?: { estimate?: RequestEstimate; shrink?: number }): Promise<CondenseResult>;
  /** What to look at when the history cannot be made to fit (named in the error). */
  readonly hint?: string;
}

/** Thrown by askLlm when the check after a condensation summary ended the run: the request the summary made room for is not sent. */
export class StoppedAfterSummary extends Error {
  constructor() {
    super('A spending limit was reached with the condensation summary.');
    this.name = 'StoppedAfterSummary';
  }
}

/** How many times a run summarises again, with smaller inputs, when the provider still refuses the prompt. */
const SHRINK_STEPS = 3;

/**
 * One request over the history as it stands, answer streamed as deltas, usage recorded. The next
 * request is estimated first and the history condensed when it would pass the threshold. When
 * the provider refuses the prompt as too long, the overflow ladder runs: old tool outputs are
 * cleared to pointers, then the history is summarised with shrinking inputs, then the run fails
 * with an error that says so. `noTools`: the tools stay in the request (the cached prompt prefix
 * holds) but the model may not call them.
 */
export async function askLlm(
  context: LlmRequestContext,
  options: {
    settings: LlmSettings;
    signal: AbortSignal;
    noTools?: boolean;
    output?: OutputRequirement | null;
    /** After a condensation summary, before the request: true when a spending limit ended the run (recorded). */
    afterSummary?: () => Promise<boolean>;
  },
): Promise<LlmResponse> {
  const output = options.output ?? null;
  const tools = output?.toolSchema ? [...context.toolSchemas, output.toolSchema] : context.toolSchemas;
  const due = context.condenser.due(estimateRequest(context, tools));
  if (due) {
    const condensed = await context.condenser.run(due, { estimate: estimateRequest(context, tools) });
    // The summary spent too: the limits checked before the turn are checked again before its request.
    if (condensed.kind === 'condensed' && (await options.afterSummary?.())) throw new StoppedAfterSummary();
  }
  if (options.signal.aborted) throw options.signal.reason;
  const request = async () => {
    const estimate = estimateRequest(context, tools);
    // Events of the request's retries and fallbacks are written in order, before its usage.
    const events = requestHooks(context, context.history.lastUserSeq);
    let response: LlmResponse;
    try {
      response = await context.llm.complete(await withHistory(context, {
        settings: options.settings,
        tools,
        ...(output?.responseFormat ? { responseFormat: output.responseFormat } : {}),
        ...(options.noTools ? { toolChoice: 'none' as const } : {}),
        signal: options.signal,
        onTextDelta: (text) => context.delta(text),
        // `llm.reasoning.show: false`: the reasoning is neither streamed nor recorded.
        ...(context.reasoningDelta && options.settings.reasoning?.show !== false ? { onReasoningDelta: (text: string) => context.reasoningDelta!(text) } : {}),
        ...events.hooks,
      }));
    } finally {
      await events.written();
    }
    if (response.usage.prompt_tokens > 0) ratios.set(context, Math.min(2, Math.max(1, response.usage.prompt_tokens / estimate.tokens)));
    await context.onUsage(response.usage, response.model ?? options.settings.model);
    return response;
  };
  try {
    return await request();
  } catch (error) {
    if (!isOverflow(error) || options.signal.aborted) throw error;
    return overflowLadder(context, { request, tools, refused: error, signal: options.signal });
  }
}

/** The next request's size, estimated (see RequestEstimate). */
function estimateRequest(context: LlmRequestContext, tools: readonly LlmToolSchema[]): RequestEstimate {
  const toolTokens = estimateToolTokens(tools);
  return { tokens: context.history.estimatedTokens() + toolTokens, fixed: context.history.systemTokens + toolTokens, ratio: ratios.get(context) ?? 1 };
}

function isOverflow(error: unknown): error is LlmError {
  return error instanceof LlmError && error.code === 'llm_context_exceeded';
}

/** The rungs after a refused prompt: clear old outputs, summarise (smaller each time), fail with a clear error. */
async function overflowLadder(context: LlmRequestContext, options: { request: () => Promise<LlmResponse>; tools: readonly LlmToolSchema[]; refused: LlmError; signal: AbortSignal }): Promise<LlmResponse> {
  let refused = options.refused;
  const retry = async (): Promise<LlmResponse | null> => {
    try {
      return await options.request();
    } catch (error) {
      if (!isOverflow(error) || options.signal.aborted) throw error;
      refused = error;
      return null;
    }
  };
  const toolContext = context.toolContext;
  const save = toolContext ? async (text: string, tool: string) => (await saveFullOutput(text, { tool, context: toolContext })).relative : undefined;
  if ((await clearOldOutputs(context.history, save)) > 0) {
    const answered = await retry();
    if (answered) return answered;
  }
  let condensed = 0;
  for (let shrink = 0; shrink < SHRINK_STEPS; shrink += 1) {
    let result: CondenseResult;
    try {
      result = await context.condenser.run('context_exceeded', { estimate: estimateRequest(context, options.tools), shrink });
    } catch (error) {
      // The summary request was itself too long: the next step gives it less.
      if (!isOverflow(error) || options.signal.aborted) throw error;
      refused = error;
      continue;
    }
    if (result.kind === 'blocked') throw new LlmError(refused.code, `${refused.message} Condensing the history was blocked by a PreCompact hook: ${result.reason}`, refused.status, refused.more);
    if (result.kind === 'nothing') continue;
    condensed += 1;
    const answered = await retry();
    if (answered) return answered;
  }
  const tried = condensed > 0 ? `after clearing old tool outputs and condensing the history ${condensed} time${condensed === 1 ? '' : 's'}` : 'and there was nothing left to condense';
  throw new LlmError(refused.code, `${refused.message} The conversation does not fit the model's context window ${tried} (${context.condenser.hint ?? 'see condenser.keep_first and keep_last'}).`, refused.status, refused.more);
}

/** Per run (its request context): the provider's count over the estimate at the last request. */
const ratios = new WeakMap<LlmRequestContext, number>();

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
