import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { Api, Features } from './api.js';
import { FilesPanel } from './files-panel.js';
import { SecretsPanel } from './secrets-panel.js';
import { Timeline } from './timeline.js';
import { TimelineStore } from './timeline-store.js';
import type { AgentEvent, Conversation } from './types.js';
import { useAction } from './use-action.js';
import { WebhooksPanel } from './webhooks-panel.js';
import { SchedulesPanel } from './schedules-panel.js';
import { ConnectionState, StatusBadge, UsageLine } from './widgets.js';

const TABS = ['timeline', 'files', 'webhooks', 'schedules', 'secrets'] as const;
type Tab = (typeof TABS)[number];

function PendingActions({ api, conversation }: { api: Api; conversation: Conversation }) {
  const [reason, setReason] = useState('');
  const action = useAction();
  if (conversation.status !== 'waiting_for_confirmation' || conversation.pending_actions.length === 0) return null;
  const base = `/conversations/${conversation.id}`;
  return (
    <div class="pending" data-testid="pending-actions">
      <strong>Waiting for your approval</strong>
      {conversation.pending_actions.map((pending) => (
        <div class="pending-action" key={String(pending.tool_call_id ?? pending.id)}>
          <span class="tool">{String(pending.tool_name)}</span> <code>{JSON.stringify(pending.arguments)}</code>
        </div>
      ))}
      <div class="row">
        <button class="primary" disabled={action.busy} onClick={() => action.run(() => api.post(`${base}/approve`))}>
          Approve
        </button>
        <input placeholder="Reason (optional)" value={reason} onInput={(event) => setReason(event.currentTarget.value)} />
        <button class="danger" disabled={action.busy} onClick={() => action.run(() => api.post(`${base}/reject`, reason ? { reason } : {}))}>
          Reject
        </button>
      </div>
      {action.error ? <div class="error-text">{action.error}</div> : null}
    </div>
  );
}

function Question({ api, features, conversation, events }: { api: Api; features: Features; conversation: Conversation; events: AgentEvent[] }) {
  const [answer, setAnswer] = useState('');
  const action = useAction();
  const question = [...events].reverse().find((event) => event.kind === 'question');
  if (conversation.status !== 'waiting_for_input' || !question) return null;
  const send = (content: string) =>
    action.run(async () => {
      if (features.answer) await api.post(`/conversations/${conversation.id}/answer`, { tool_call_id: question.tool_call_id, content });
      else await api.post(`/conversations/${conversation.id}/messages`, { content });
      setAnswer('');
    });
  return (
    <div class="pending" data-testid="question">
      <strong>The agent asks:</strong> {String(question.question)}
      {Array.isArray(question.options) ? (
        <div class="row">
          {question.options.map((option) => (
            <button key={String(option)} onClick={() => send(String(option))} disabled={action.busy}>
              {String(option)}
            </button>
          ))}
        </div>
      ) : null}
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault();
          if (answer.trim()) void send(answer);
        }}
      >
        <input placeholder="Your answer" value={answer} onInput={(event) => setAnswer(event.currentTarget.value)} />
        <button type="submit" disabled={action.busy}>
          Answer
        </button>
      </form>
      {action.error ? <div class="error-text">{action.error}</div> : null}
    </div>
  );
}

function Composer({ api, conversationId }: { api: Api; conversationId: string }) {
  const [text, setText] = useState('');
  const action = useAction();
  const send = () => {
    if (!text.trim()) return;
    void action.run(async () => {
      await api.post(`/conversations/${conversationId}/messages`, { content: text });
      setText('');
    });
  };
  return (
    <form
      class="composer"
      onSubmit={(event) => {
        event.preventDefault();
        send();
      }}
    >
      <textarea
        placeholder="Message the agent (Ctrl+Enter to send)"
        value={text}
        onInput={(event) => setText(event.currentTarget.value)}
        onKeyDown={(event) => {
          if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
            event.preventDefault();
            send();
          }
        }}
      />
      <button type="submit" class="primary" disabled={action.busy || !text.trim()}>
        Send
      </button>
      {action.error ? <div class="error-text">{action.error}</div> : null}
    </form>
  );
}

function Controls({ api, conversation }: { api: Api; conversation: Conversation }) {
  const action = useAction();
  const base = `/conversations/${conversation.id}`;
  const running = conversation.status === 'running';
  return (
    <div class="controls">
      <button disabled={action.busy || running} onClick={() => action.run(() => api.post(`${base}/run`))}>
        Run
      </button>
      <button disabled={action.busy || !running} onClick={() => action.run(() => api.post(`${base}/pause`))}>
        Pause
      </button>
      <button disabled={action.busy || !conversation.current_run_id} onClick={() => action.run(() => api.delete(`${base}/runs/${conversation.current_run_id}`))}>
        Cancel
      </button>
      <label class="check" title="Ask before every action">
        <input type="checkbox" checked={conversation.confirmation_mode} onChange={(event) => action.run(() => api.post(`${base}/confirmation`, { enabled: event.currentTarget.checked }))} />
        confirm actions
      </label>
      {action.error ? <span class="error-text">{action.error}</span> : null}
    </div>
  );
}

/** Kinds after which the conversation's status, usage or pending actions may have changed. */
const REFRESHING = new Set(['state_update', 'usage', 'action', 'rejection', 'question', 'agent_error', 'message']);

export function ConversationView({ api, features, id, tab, onTab }: { api: Api; features: Features; id: string; tab: Tab; onTab: (tab: Tab) => void }) {
  const [conversation, setConversation] = useState<Conversation | null>(null);
  const [error, setError] = useState<string | null>(null);
  const store = useMemo(() => new TimelineStore(api, id), [api, id]);
  const [, setVersion] = useState(0);
  const refreshTimer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const lastCount = useRef(0);

  const refresh = () =>
    api.get<Conversation>(`/conversations/${id}`).then(
      (loaded) => {
        setConversation(loaded);
        setError(null);
      },
      (caught: Error) => setError(caught.message),
    );

  useEffect(() => {
    setConversation(null);
    void refresh();
    void store.start();
    const unsubscribe = store.subscribe(() => {
      setVersion((version) => version + 1);
      const fresh = store.events.slice(lastCount.current);
      lastCount.current = store.events.length;
      if (fresh.some((event) => REFRESHING.has(event.kind)) && refreshTimer.current === null) {
        refreshTimer.current = setTimeout(() => {
          refreshTimer.current = null;
          void refresh();
        }, 150);
      }
    });
    return () => {
      unsubscribe();
      store.stop();
      lastCount.current = 0;
      if (refreshTimer.current) clearTimeout(refreshTimer.current);
      refreshTimer.current = null;
    };
  }, [store]);

  if (error && !conversation) return <div class="main-empty error-box">{error}</div>;
  if (!conversation) return <div class="main-empty">Loading…</div>;
  return (
    <section class="conversation" data-testid="conversation" data-id={conversation.id}>
      <header class="conversation-head">
        <div>
          <h2>{conversation.title ?? 'Untitled conversation'}</h2>
          <div class="subtle">
            {conversation.llm?.model ?? 'no LLM configured'} · <code>{conversation.workdir}</code>
          </div>
        </div>
        <div class="head-right">
          <StatusBadge status={conversation.status} />
          <UsageLine usage={conversation.usage} />
        </div>
      </header>
      <Controls api={api} conversation={conversation} />
      <nav class="tabs">
        {TABS.map((name) => (
          <button key={name} class={name === tab ? 'tab active' : 'tab'} onClick={() => onTab(name)}>
            {name[0]!.toUpperCase() + name.slice(1)}
          </button>
        ))}
        {/* In the tab row, not over the timeline, where it covered the events' timestamps. */}
        <span class="tabs-state">
          <ConnectionState state={store.state} name="timeline" />
        </span>
      </nav>
      {tab === 'timeline' ? (
        <div class="timeline-pane">
          <Timeline store={store} />
          <PendingActions api={api} conversation={conversation} />
          <Question api={api} features={features} conversation={conversation} events={store.events} />
          <Composer api={api} conversationId={conversation.id} />
        </div>
      ) : tab === 'files' ? (
        <FilesPanel api={api} features={features} conversationId={conversation.id} />
      ) : tab === 'webhooks' ? (
        <WebhooksPanel api={api} conversationId={conversation.id} />
      ) : tab === 'schedules' ? (
        <SchedulesPanel api={api} conversationId={conversation.id} />
      ) : (
        <SecretsPanel api={api} conversationId={conversation.id} />
      )}
    </section>
  );
}

export { TABS, type Tab };
