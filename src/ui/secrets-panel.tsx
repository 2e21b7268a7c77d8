import { useEffect, useState } from 'preact/hooks';
import type { Api } from './api.js';
import { useAction } from './use-action.js';

/** Secrets by name: set (the value is sent once and never shown again) and delete. */
export function SecretsPanel({ api, conversationId }: { api: Api; conversationId: string }) {
  const base = `/conversations/${conversationId}/secrets`;
  const [names, setNames] = useState<string[]>([]);
  const [name, setName] = useState('');
  const [value, setValue] = useState('');
  const action = useAction();
  const load = () => action.run(async () => setNames((await api.get<{ names: string[] }>(base)).names));
  useEffect(() => {
    void load();
  }, [conversationId]);

  return (
    <section class="panel" data-testid="secrets">
      <h3>Secrets</h3>
      <p class="subtle">The agent gets them as environment variables; their values are masked everywhere and never shown here.</p>
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault();
          void action.run(async () => {
            await api.put(base, { secrets: { [name]: value } });
            setName('');
            setValue('');
            await load();
          });
        }}
      >
        <input required placeholder="NAME" pattern="[A-Za-z_][A-Za-z0-9_]*" value={name} onInput={(event) => setName(event.currentTarget.value)} />
        <input required type="password" autocomplete="off" placeholder="value" value={value} onInput={(event) => setValue(event.currentTarget.value)} />
        <button type="submit" class="primary" disabled={action.busy}>
          Set
        </button>
      </form>
      {action.error ? <div class="error-text">{action.error}</div> : null}
      <ul class="names">
        {names.map((secret) => (
          <li key={secret}>
            <code>{secret}</code> <span class="subtle">••••••</span>
            <button class="link danger" onClick={() => action.run(async () => (await api.delete(`${base}/${encodeURIComponent(secret)}`), await load()))}>
              delete
            </button>
          </li>
        ))}
      </ul>
      {names.length === 0 ? <div class="subtle">No secrets.</div> : null}
    </section>
  );
}
