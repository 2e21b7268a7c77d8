import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, type Api } from './api.js';
import { LiveStream, type StreamState } from './live-stream.js';
import { STATUSES, type AgentEvent, type Conversation, type Page } from './types.js';
import { useAction } from './use-action.js';
import { ConnectionState, StatusBadge } from './widgets.js';

const CURSOR_STORAGE = 'agentd.firehose';

/**
 * The conversation list, kept current by the firehose: an event of a conversation not known, or
 * newer than its known `event_count`, refreshes that conversation (at most once per 300 ms each).
 * The stream starts at the firehose's head (`firehose_cursor` of GET /info), and its cursor is
 * kept for the tab's session, so neither a first load nor a reload replays the whole history.
 */
function useConversations(api: Api, status: string): { conversations: Conversation[]; state: StreamState; error: string | null; upsert: (conversation: Conversation) => void } {
  const [byId, setById] = useState<Map<string, Conversation>>(new Map());
  const [state, setState] = useState<StreamState>('connecting');
  const [error, setError] = useState<string | null>(null);
  const known = useRef(new Map<string, Conversation>());
  const timers = useRef(new Map<string, ReturnType<typeof setTimeout>>());

  const upsert = (conversation: Conversation) => {
    known.current.set(conversation.id, conversation);
    setById(new Map(known.current));
  };
  const forget = (id: string) => {
    known.current.delete(id);
    setById(new Map(known.current));
  };

  const loadList = (isStopped: () => boolean) =>
    api.get<Page<Conversation>>('/conversations', { limit: 500, sort: 'updated_at', order: 'desc', status }).then(
      (page) => {
        if (isStopped()) return;
        for (const conversation of page.items) known.current.set(conversation.id, conversation);
        setById(new Map(known.current));
        setError(null);
      },
      (caught: Error) => setError(caught.message),
    );

  const firstLoad = useRef(true);
  useEffect(() => {
    // The first list is loaded by the stream effect, after it has its start cursor.
    if (firstLoad.current) {
      firstLoad.current = false;
      return;
    }
    let stopped = false;
    void loadList(() => stopped);
    return () => {
      stopped = true;
    };
  }, [api, status]);

  useEffect(() => {
    let stopped = false;
    let stream: LiveStream | null = null;
    const refresh = (id: string) => {
      if (timers.current.has(id)) return;
      timers.current.set(
        id,
        setTimeout(() => {
          timers.current.delete(id);
          api.get<Conversation>(`/conversations/${id}`).then(upsert, (caught) => {
            if (caught instanceof ApiError && caught.status === 404) forget(id);
          });
        }, 300),
      );
    };
    // Join the firehose at its head (GET /info) rather than replaying every event ever recorded;
    // the list is read after that point, so nothing between the two is missed.
    const start = async (): Promise<string | null> => {
      const stored = sessionStorage.getItem(CURSOR_STORAGE);
      try {
        const head = (await api.get<{ firehose_cursor?: number }>('/info')).firehose_cursor;
        if (typeof head !== 'number') return stored;
        // A cursor past the head belongs to another server (or data dir): start at the head.
        return stored && Number(stored) <= head ? stored : String(head);
      } catch {
        return stored;
      }
    };
    const open = (cursor: string | null) => new LiveStream({
      cursor,
      url: (cursor) => api.streamUrl('/events/stream', { after_seq: cursor ?? 0 }),
      onState: setState,
      onEvent: (kind, data, id) => {
        if (id) sessionStorage.setItem(CURSOR_STORAGE, id);
        const event = data as AgentEvent;
        if (kind === 'stream_closed' && typeof (data as { conversation_id?: string }).conversation_id === 'string') {
          forget((data as { conversation_id: string }).conversation_id);
          return;
        }
        if (typeof event.conversation_id !== 'string' || typeof event.seq !== 'number') return;
        const current = known.current.get(event.conversation_id);
        if (!current || event.seq > current.event_count) refresh(event.conversation_id);
      },
    });
    void start().then(async (cursor) => {
      await loadList(() => stopped);
      if (!stopped) stream = open(cursor);
    });
    return () => {
      stopped = true;
      stream?.close();
      for (const timer of timers.current.values()) clearTimeout(timer);
      timers.current.clear();
    };
  }, [api]);

  const conversations = [...byId.values()].filter((conversation) => !status || conversation.status === status).sort((a, b) => b.updated_at.localeCompare(a.updated_at));
  return { conversations, state, error, upsert };
}

function CreateForm({ api, onCreated, onCancel }: { api: Api; onCreated: (conversation: Conversation) => void; onCancel: () => void }) {
  const [title, setTitle] = useState('');
  const [workdir, setWorkdir] = useState('');
  const [model, setModel] = useState('');
  const [baseUrl, setBaseUrl] = useState('');
  const [llmKey, setLlmKey] = useState('');
  const [message, setMessage] = useState('');
  const [confirm, setConfirm] = useState(false);
  const action = useAction();
  return (
    <form
      class="create"
      data-testid="create-form"
      onSubmit={(event) => {
        event.preventDefault();
        void action.run(async () => {
          const body: Record<string, unknown> = { confirmation_mode: confirm };
          if (title.trim()) body.title = title.trim();
          if (workdir.trim()) body.workdir = workdir.trim();
          // A model given here replaces the server's default LLM config as a whole (no merge).
          if (model.trim()) body.llm = { model: model.trim(), ...(baseUrl.trim() ? { base_url: baseUrl.trim() } : {}), ...(llmKey ? { api_key: llmKey } : {}) };
          if (message.trim()) body.initial_message = message;
          onCreated(await api.post<Conversation>('/conversations', body));
        });
      }}
    >
      <input name="title" placeholder="Title" value={title} onInput={(event) => setTitle(event.currentTarget.value)} />
      <input name="workdir" placeholder="Workdir (absolute; empty: a fresh one)" value={workdir} onInput={(event) => setWorkdir(event.currentTarget.value)} />
      <input name="model" placeholder="Model (empty: the server's default)" value={model} onInput={(event) => setModel(event.currentTarget.value)} />
      {model.trim() ? (
        <>
          <input name="base_url" placeholder="LLM base URL (OpenAI-compatible; optional)" value={baseUrl} onInput={(event) => setBaseUrl(event.currentTarget.value)} />
          <input name="api_key" type="password" autocomplete="off" placeholder="LLM API key (optional)" value={llmKey} onInput={(event) => setLlmKey(event.currentTarget.value)} />
        </>
      ) : null}
      <textarea name="message" placeholder="First message (starts a run)" value={message} onInput={(event) => setMessage(event.currentTarget.value)} />
      <label class="check">
        <input type="checkbox" checked={confirm} onChange={(event) => setConfirm(event.currentTarget.checked)} /> ask before every action
      </label>
      <div class="row">
        <button type="submit" class="primary" disabled={action.busy}>
          Create
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
      {action.error ? <div class="error-text">{action.error}</div> : null}
    </form>
  );
}

export function ConversationList({ api, selected, onSelect }: { api: Api; selected: string | null; onSelect: (id: string) => void }) {
  const [status, setStatus] = useState('');
  const [search, setSearch] = useState('');
  const [creating, setCreating] = useState(false);
  const { conversations, state, error, upsert } = useConversations(api, status);
  const needle = search.trim().toLowerCase();
  const shown = needle ? conversations.filter((conversation) => (conversation.title ?? '').toLowerCase().includes(needle)) : conversations;
  return (
    <aside class="sidebar">
      <div class="sidebar-head">
        <h1>agentd</h1>
        <ConnectionState state={state} name="firehose" />
      </div>
      <div class="filters">
        <input type="search" placeholder="Search titles" value={search} onInput={(event) => setSearch(event.currentTarget.value)} data-testid="search" />
        <select value={status} onChange={(event) => setStatus(event.currentTarget.value)} data-testid="status-filter">
          <option value="">all statuses</option>
          {STATUSES.map((name) => (
            <option key={name} value={name}>
              {name.replace(/_/g, ' ')}
            </option>
          ))}
        </select>
      </div>
      {creating ? (
        <CreateForm
          api={api}
          onCancel={() => setCreating(false)}
          onCreated={(conversation) => {
            upsert(conversation);
            setCreating(false);
            onSelect(conversation.id);
          }}
        />
      ) : (
        <button class="primary new" onClick={() => setCreating(true)}>
          + New conversation
        </button>
      )}
      {error ? <div class="error-text">{error}</div> : null}
      <ul class="conversation-list" data-testid="conversation-list">
        {shown.map((conversation) => (
          <li key={conversation.id} class={conversation.id === selected ? 'selected' : ''} data-id={conversation.id} onClick={() => onSelect(conversation.id)}>
            <div class="title">{conversation.title ?? 'Untitled'}</div>
            <div class="meta">
              <StatusBadge status={conversation.status} />
              <span class="subtle" title={conversation.updated_at}>
                {new Date(conversation.updated_at).toLocaleTimeString()}
              </span>
            </div>
          </li>
        ))}
      </ul>
      {shown.length === 0 && !error ? <div class="subtle empty">No conversations{needle || status ? ' match' : ' yet'}.</div> : null}
    </aside>
  );
}
