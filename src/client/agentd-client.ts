import { streamItems, type FirehoseOptions, type StreamItem, type StreamOptions } from './event-stream.js';
import { HttpTransport, pathParam, type ClientOptions, type RequestOptions } from './http-transport.js';
import { query, runToEnd, type QueryOptions, type RunResult } from './query.js';
import type * as T from './types.js';

type Signal = { signal?: AbortSignal };
/** A file to upload: its path below the target directory and its bytes. */
export interface UploadFile {
  path: string;
  content: Blob | Uint8Array | string;
}

/**
 * A typed client for every route of agentd's HTTP contract, grouped by resource. Each method is
 * one route: adding a route is one line here plus its types in types.ts.
 *
 *   const client = new AgentdClient({ url: 'http://127.0.0.1:8000', apiKey: process.env.AGENTD_KEY });
 *   for await (const event of client.query({ prompt: 'List the files' })) console.log(event.kind);
 *   const { status, final_text } = await client.run({ prompt: 'What is 2 + 2?' });
 */
export class AgentdClient {
  readonly http: HttpTransport;

  constructor(options: ClientOptions) {
    this.http = new HttpTransport(options);
  }

  /** The events of one run (deltas included), resuming by itself after a dropped connection. */
  query(options: QueryOptions): AsyncGenerator<T.StreamEvent, void, undefined> {
    return query(this, options);
  }

  /** One run to its end: `{ status, final_text, output, usage, events }`. */
  run(options: QueryOptions): Promise<RunResult> {
    return runToEnd(this, options);
  }

  private get<R>(path: string, options?: RequestOptions) {
    return this.http.json<R>(path, options);
  }

  private post<R>(path: string, body?: unknown, options?: RequestOptions) {
    return this.http.json<R>(path, { ...options, method: 'POST', body: body ?? {} });
  }

  private conversationPath(id: string, rest = ''): string {
    return `/conversations/${pathParam(id)}${rest}`;
  }

  readonly health = {
    alive: (o?: Signal) => this.get<T.Alive>('/alive', o),
    /** Readiness: a 503 answer (not ready) is returned, not thrown. */
    ready: async (o?: Signal) => {
      const response = await this.http.fetch(this.http.url('/health'), { headers: this.http.headers(), ...o });
      return (await response.json()) as T.Health;
    },
    info: (o?: Signal) => this.get<T.Info>('/info', o),
    /** Prometheus text. */
    metrics: async (o?: Signal) => (await this.http.send('/metrics', { ...o })).text(),
    openapi: (o?: Signal) => this.get<Record<string, unknown>>('/openapi.json', o),
    asyncapi: (o?: Signal) => this.get<Record<string, unknown>>('/asyncapi.json', o),
  };

  readonly conversations = {
    create: (body: T.CreateConversationInput = {}, o?: Signal) => this.post<T.Conversation>('/conversations', body, o),
    list: (query: T.ConversationListQuery = {}, o?: Signal) => this.get<T.ConversationPage>('/conversations', { query, ...o }),
    count: (query: Pick<T.ConversationListQuery, 'status'> = {}, o?: Signal) => this.get<T.Count>('/conversations/count', { query, ...o }),
    get: (id: string, o?: Signal) => this.get<T.Conversation>(this.conversationPath(id), o),
    updateConfig: (id: string, body: T.UpdateConversationConfigInput, o?: Signal) => this.http.json<T.Conversation>(this.conversationPath(id, '/config'), { method: 'PUT', body, ...o }),
    delete: (id: string, query: T.DeleteConversationOptions = {}, o?: Signal) => this.http.json<null>(this.conversationPath(id), { method: 'DELETE', query, ...o }),
    /** A new conversation with this one's events up to `at_seq`, its config, optionally its secrets and a copy of its workdir. */
    fork: (id: string, body: T.ForkInput = {}, o?: Signal) => this.post<T.Conversation>(this.conversationPath(id, '/fork'), body, o),
    /** Summarize the middle of the LLM history now (during a run: before its next LLM request). */
    condense: (id: string, body: T.CondenseInput = {}, o?: Signal) => this.post<T.CondenseAccepted>(this.conversationPath(id, '/condense'), body, o),
    /** Every conversation, page after page. */
    all: (query: Omit<T.ConversationListQuery, 'page_id'> = {}) => this.pages((page_id) => this.conversations.list({ ...query, page_id })),
  };

  readonly messages = {
    send: (id: string, body: T.SendMessageInput, o?: Signal) => this.post<T.MessageAccepted>(this.conversationPath(id, '/messages'), body, o),
  };

  readonly runs = {
    start: (id: string, o?: Signal) => this.post<T.RunStarted>(this.conversationPath(id, '/run'), undefined, o),
    pause: (id: string, o?: Signal) => this.post<T.Conversation>(this.conversationPath(id, '/pause'), undefined, o),
    setConfirmation: (id: string, enabled: boolean, o?: Signal) => this.post<T.Conversation>(this.conversationPath(id, '/confirmation'), { enabled }, o),
    approve: (id: string, o?: Signal) => this.post<T.RunStarted>(this.conversationPath(id, '/approve'), undefined, o),
    reject: (id: string, body: T.RejectInput = {}, o?: Signal) => this.post<T.RunStarted>(this.conversationPath(id, '/reject'), body, o),
    /** Answer the open `ask_user` question (status `waiting_for_input`); the run goes on. */
    answer: (id: string, body: T.AnswerInput, o?: Signal) => this.post<T.AnswerAccepted>(this.conversationPath(id, '/answer'), body, o),
    list: (id: string, query: T.RunListQuery = {}, o?: Signal) => this.get<T.RunPage>(this.conversationPath(id, '/runs'), { query, ...o }),
    get: (id: string, runId: string, o?: Signal) => this.get<T.Run>(this.conversationPath(id, `/runs/${pathParam(runId)}`), o),
    cancel: (id: string, runId: string, o?: Signal) => this.http.json<T.Run>(this.conversationPath(id, `/runs/${pathParam(runId)}`), { method: 'DELETE', ...o }),
  };

  readonly events = {
    list: (id: string, query: T.EventListQuery = {}, o?: Signal) => this.get<T.EventPage>(this.conversationPath(id, '/events'), { query, ...o }),
    count: (id: string, query: T.EventFilters = {}, o?: Signal) => this.get<T.Count>(this.conversationPath(id, '/events/count'), { query, ...o }),
    get: (id: string, eventId: string, o?: Signal) => this.get<T.AgentEvent>(this.conversationPath(id, `/events/${pathParam(eventId)}`), o),
    /** Every event of a conversation (with filters), page after page. */
    all: (id: string, query: Omit<T.EventListQuery, 'page_id'> = {}) => this.pages((page_id) => this.events.list(id, { ...query, page_id })),
    /** A conversation's live stream (history after `after` first), resuming after a dropped connection. */
    stream: (id: string, options: StreamOptions = {}) => mapEvents(this.events.streamItems(id, options)),
    streamItems: (id: string, options: StreamOptions = {}): AsyncGenerator<StreamItem> => streamItems(this.http, this.conversationPath(id, '/events/stream'), options),
    /** Every conversation's events the key may see (`after` is the firehose's global cursor); an admin key may pick one `owner`. */
    firehose: (options: FirehoseOptions = {}): AsyncGenerator<StreamItem> => streamItems(this.http, options.owner === undefined ? '/events/stream' : `/events/stream?owner=${encodeURIComponent(options.owner)}`, options),
  };

  readonly callbacks = {
    create: (id: string, body: T.CreateCallbackInput, o?: Signal) => this.post<T.Callback>(this.conversationPath(id, '/callbacks'), body, o),
    list: (id: string, query: T.PageQuery = {}, o?: Signal) => this.get<T.CallbackList>(this.conversationPath(id, '/callbacks'), { query, ...o }),
    delete: (id: string, callbackId: string, o?: Signal) => this.http.json<null>(this.conversationPath(id, `/callbacks/${pathParam(callbackId)}`), { method: 'DELETE', ...o }),
    deliveries: (id: string, callbackId: string, query: T.PageQuery = {}, o?: Signal) =>
      this.get<T.CallbackDeliveryList>(this.conversationPath(id, `/callbacks/${pathParam(callbackId)}/deliveries`), { query, ...o }),
    enable: (id: string, callbackId: string, o?: Signal) => this.post<T.Callback>(this.conversationPath(id, `/callbacks/${pathParam(callbackId)}/enable`), undefined, o),
  };

  /** API keys (the admin's: keys:admin), and the calling key's own record. */
  readonly keys = {
    create: (body: T.CreateKeyInput, o?: Signal) => this.post<T.CreatedApiKey>('/keys', body, o),
    list: (query: T.KeyListQuery = {}, o?: Signal) => this.get<T.KeyList>('/keys', { query, ...o }),
    get: (id: string, o?: Signal) => this.get<T.ApiKey>(`/keys/${pathParam(id)}`, o),
    me: (o?: Signal) => this.get<T.ApiKey>('/keys/me', o),
    update: (id: string, body: T.UpdateKeyInput, o?: Signal) => this.http.json<T.ApiKey>(`/keys/${pathParam(id)}`, { method: 'PATCH', body, ...o }),
    delete: (id: string, o?: Signal) => this.http.json<null>(`/keys/${pathParam(id)}`, { method: 'DELETE', ...o }),
    /** A new secret, answered this once; the old one keeps working for `grace_s`. */
    rotate: (id: string, body: T.RotateKeyInput = {}, o?: Signal) => this.post<T.CreatedApiKey>(`/keys/${pathParam(id)}/rotate`, body, o),
  };

  /** The audit log (scope audit:read): who did what, oldest first. */
  readonly audit = {
    list: (query: T.AuditQuery = {}, o?: Signal) => this.get<T.AuditList>('/audit', { query, ...o }),
  };

  readonly schedules = {
    create: (body: T.CreateScheduleInput, o?: Signal) => this.post<T.Schedule>('/schedules', body, o),
    /** A schedule whose target is this conversation. */
    createForConversation: (conversationId: string, body: T.CreateConversationScheduleInput, o?: Signal) => this.post<T.Schedule>(this.conversationPath(conversationId, '/schedules'), body, o),
    list: (query: T.ScheduleListQuery = {}, o?: Signal) => this.get<T.ScheduleList>('/schedules', { query, ...o }),
    get: (id: string, o?: Signal) => this.get<T.Schedule>(`/schedules/${pathParam(id)}`, o),
    update: (id: string, body: T.UpdateScheduleInput, o?: Signal) => this.http.json<T.Schedule>(`/schedules/${pathParam(id)}`, { method: 'PATCH', body, ...o }),
    delete: (id: string, o?: Signal) => this.http.json<null>(`/schedules/${pathParam(id)}`, { method: 'DELETE', ...o }),
    /** Fire now; the next slot still fires. */
    trigger: (id: string, o?: Signal) => this.post<T.ScheduleFire>(`/schedules/${pathParam(id)}/trigger`, undefined, o),
    pause: (id: string, body: { note?: string } = {}, o?: Signal) => this.post<T.Schedule>(`/schedules/${pathParam(id)}/pause`, body, o),
    resume: (id: string, o?: Signal) => this.post<T.Schedule>(`/schedules/${pathParam(id)}/resume`, undefined, o),
    /** One record per slot, newest first. */
    fires: (id: string, query: T.PageQuery = {}, o?: Signal) => this.get<T.ScheduleFireList>(`/schedules/${pathParam(id)}/fires`, { query, ...o }),
    preview: (query: T.SchedulePreviewQuery, o?: Signal) => this.get<T.SchedulePreview>('/schedules/preview', { query, ...o }),
  };

  readonly files = {
    upload: (id: string, files: UploadFile[], query: { path?: string } = {}, o?: Signal) => {
      const form = new FormData();
      for (const file of files) form.append('file', file.content instanceof Blob ? file.content : new Blob([file.content]), file.path);
      return this.http.json<T.UploadedFiles>(this.conversationPath(id, '/files/upload'), { method: 'POST', body: form, query, ...o });
    },
    list: (id: string, query: T.FileListQuery = {}, o?: Signal) => this.get<T.FileList>(this.conversationPath(id, '/files'), { query, ...o }),
    /** The file's bytes. */
    download: async (id: string, path: string, o?: Signal) => new Uint8Array(await (await this.http.send(this.conversationPath(id, `/files/${pathParam(path, { keepSlashes: true })}`), { ...o })).arrayBuffer()),
    /** The file as UTF-8 text. */
    readText: async (id: string, path: string, o?: Signal) => new TextDecoder().decode(await this.files.download(id, path, o)),
    delete: (id: string, path: string, o?: Signal) => this.http.json<null>(this.conversationPath(id, `/files/${pathParam(path, { keepSlashes: true })}`), { method: 'DELETE', ...o }),
    mkdir: (id: string, path: string, o?: Signal) => this.post<T.FileEntry>(this.conversationPath(id, `/dirs/${pathParam(path, { keepSlashes: true })}`), undefined, o),
    search: (id: string, query: T.FileSearchQuery, o?: Signal) => this.get<T.FileList>(this.conversationPath(id, '/files-search'), { query, ...o }),
  };

  readonly commands = {
    run: (id: string, body: T.RunCommandInput, o?: Signal) => this.post<T.CommandResult>(this.conversationPath(id, '/commands'), body, o),
  };

  readonly secrets = {
    put: (id: string, secrets: T.PutSecretsInput['secrets'], o?: Signal) => this.http.json<T.SecretNames>(this.conversationPath(id, '/secrets'), { method: 'PUT', body: { secrets }, ...o }),
    list: (id: string, o?: Signal) => this.get<T.SecretNames>(this.conversationPath(id, '/secrets'), o),
    delete: (id: string, name: string, o?: Signal) => this.http.json<null>(this.conversationPath(id, `/secrets/${pathParam(name)}`), { method: 'DELETE', ...o }),
  };

  readonly checkpoints = {
    list: (id: string, query: T.CheckpointListQuery = {}, o?: Signal) => this.get<T.CheckpointPage>(this.conversationPath(id, '/checkpoints'), { query, ...o }),
    /** Restore the workdir and/or the LLM history to a checkpoint; `undo_checkpoint` undoes it. */
    rewind: (id: string, body: T.RewindInput, o?: Signal) => this.post<T.RewindResult>(this.conversationPath(id, '/rewind'), body, o),
    /** Files changed since the first checkpoint (or `since_checkpoint`), with unified diffs. */
    changes: (id: string, query: T.ChangesQuery = {}, o?: Signal) => this.get<T.ChangesPage>(this.conversationPath(id, '/changes'), { query, ...o }),
    /** Every checkpoint, page after page. */
    all: (id: string, query: Omit<T.CheckpointListQuery, 'page_id'> = {}) => this.pages((page_id) => this.checkpoints.list(id, { ...query, page_id })),
  };

  readonly mcp = {
    /** Each MCP server of the conversation: transport, status, its tools, or why it failed (asking starts servers not yet running). */
    status: (id: string, o?: Signal) => this.get<T.McpStatusList>(this.conversationPath(id, '/mcp'), o),
  };

  readonly skills = {
    /** The skills, slash commands and subagent definitions the agent can use, where each comes from, and the files skipped as malformed. */
    list: (id: string, o?: Signal) => this.get<T.SkillCatalog>(this.conversationPath(id, '/skills'), o),
  };

  private async *pages<Item>(page: (pageId: string | undefined) => Promise<T.Page<Item>>): AsyncGenerator<Item> {
    let pageId: string | undefined;
    do {
      const result = await page(pageId);
      yield* result.items;
      pageId = result.next_page_id ?? undefined;
    } while (pageId);
  }
}

async function* mapEvents(items: AsyncGenerator<StreamItem>): AsyncGenerator<T.StreamEvent> {
  for await (const item of items) yield item.event;
}
