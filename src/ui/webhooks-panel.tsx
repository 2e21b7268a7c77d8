import { useEffect, useState } from 'preact/hooks';
import type { Api } from './api.js';
import type { Page } from './types.js';
import { useAction } from './use-action.js';

interface Callback {
  id: string;
  url: string;
  events: string[] | null;
  has_secret: boolean;
  origin: string;
  state: string;
  pending_count: number;
  delivered_count: number;
  failed_attempt_count: number;
  last_error: string | null;
}

interface Delivery {
  event_id: string;
  seq: number;
  kind: string;
  state: string;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  next_retry_at: string | null;
}

function Deliveries({ api, base, callbackId }: { api: Api; base: string; callbackId: string }) {
  const [items, setItems] = useState<Delivery[] | null>(null);
  const action = useAction();
  useEffect(() => {
    void action.run(async () => setItems((await api.get<Page<Delivery>>(`${base}/${callbackId}/deliveries`, { limit: 100 })).items));
  }, [callbackId]);
  if (action.error) return <div class="error-text">{action.error}</div>;
  if (!items) return <div class="subtle">Loading deliveries…</div>;
  if (items.length === 0) return <div class="subtle">No deliveries yet.</div>;
  return (
    <table class="deliveries" data-testid="deliveries">
      <thead>
        <tr>
          <th>#</th>
          <th>kind</th>
          <th>state</th>
          <th>attempts</th>
          <th>last status</th>
          <th>next retry</th>
        </tr>
      </thead>
      <tbody>
        {items.map((delivery) => (
          <tr key={delivery.event_id} title={delivery.last_error ?? ''}>
            <td>{delivery.seq}</td>
            <td>{delivery.kind}</td>
            <td class={`delivery-${delivery.state}`}>{delivery.state}</td>
            <td class="num">{delivery.attempts}</td>
            <td>{delivery.last_status ?? (delivery.last_error ? 'no response' : '')}</td>
            <td>{delivery.next_retry_at ? new Date(delivery.next_retry_at).toLocaleString() : ''}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function WebhooksPanel({ api, conversationId }: { api: Api; conversationId: string }) {
  const base = `/conversations/${conversationId}/callbacks`;
  const [callbacks, setCallbacks] = useState<Callback[]>([]);
  const [open, setOpen] = useState<string | null>(null);
  const [url, setUrl] = useState('');
  const [kinds, setKinds] = useState('');
  const [secret, setSecret] = useState('');
  const action = useAction();
  const load = () => action.run(async () => setCallbacks((await api.get<Page<Callback> | { items: Callback[] }>(base)).items));
  useEffect(() => {
    void load();
  }, [conversationId]);

  const create = () =>
    action.run(async () => {
      const events = kinds.split(/[\s,]+/).filter(Boolean);
      await api.post(base, { url, ...(events.length ? { events } : {}), ...(secret ? { secret } : {}) });
      setUrl('');
      setKinds('');
      setSecret('');
      await load();
    });

  return (
    <section class="panel" data-testid="webhooks">
      <h3>Webhooks</h3>
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault();
          void create();
        }}
      >
        <input required placeholder="https://receiver.example/hook" value={url} onInput={(event) => setUrl(event.currentTarget.value)} />
        <input placeholder="kinds (all when empty)" value={kinds} onInput={(event) => setKinds(event.currentTarget.value)} />
        <input type="password" autocomplete="off" placeholder="signing secret (optional)" value={secret} onInput={(event) => setSecret(event.currentTarget.value)} />
        <button type="submit" class="primary" disabled={action.busy}>
          Add
        </button>
      </form>
      {action.error ? <div class="error-text">{action.error}</div> : null}
      {callbacks.length === 0 ? <div class="subtle">No webhooks for this conversation.</div> : null}
      {callbacks.map((callback) => (
        <div class="callback" key={callback.id} data-testid="callback">
          <div class="row">
            <code>{callback.url}</code>
            <span class={`badge ${callback.state === 'failing' ? 'badge-error' : ''}`}>{callback.state}</span>
            <span class="subtle">
              {callback.events ? callback.events.join(', ') : 'all events'} · {callback.delivered_count} delivered · {callback.pending_count} pending
              {callback.has_secret ? ' · signed' : ''}
            </span>
            <span class="spacer" />
            <button class="link" onClick={() => setOpen(open === callback.id ? null : callback.id)}>
              {open === callback.id ? 'hide log' : 'delivery log'}
            </button>
            {callback.state === 'failing' ? (
              <button class="link" onClick={() => action.run(async () => (await api.post(`${base}/${callback.id}/enable`), await load()))}>
                enable
              </button>
            ) : null}
            {callback.origin === 'api' ? (
              <button class="link danger" onClick={() => action.run(async () => (await api.delete(`${base}/${callback.id}`), await load()))}>
                delete
              </button>
            ) : null}
          </div>
          {callback.last_error ? <div class="error-text">{callback.last_error}</div> : null}
          {open === callback.id ? <Deliveries api={api} base={base} callbackId={callback.id} /> : null}
        </div>
      ))}
    </section>
  );
}
