import { Component, render, type ComponentChildren } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { Api, loadFeatures, storedKey, storeKey, type Features } from './api.js';
import { ConversationList } from './conversation-list.js';
import { ConversationView, TABS, type Tab } from './conversation-view.js';

/** `#/c/<id>/<tab>` */
function parseHash(): { id: string | null; tab: Tab } {
  const [, kind, id, tab] = location.hash.split('/');
  const known = TABS.find((name) => name === tab) ?? 'timeline';
  return kind === 'c' && id ? { id, tab: known } : { id: null, tab: 'timeline' };
}

/** A view that throws while rendering shows what went wrong instead of blanking the page. */
class ErrorBoundary extends Component<{ children: ComponentChildren }, { error: Error | null }> {
  override state = { error: null as Error | null };

  override componentDidCatch(error: Error): void {
    this.setState({ error });
  }

  override render() {
    if (!this.state.error) return this.props.children;
    return (
      <div class="main-empty error-box">
        This view failed: {this.state.error.message}{' '}
        <button class="link" onClick={() => this.setState({ error: null })}>
          retry
        </button>
      </div>
    );
  }
}

/** The server's own words for a refused key (expired, rotated), else `fallback`. */
async function refusal(response: Response, fallback: string): Promise<string> {
  const body = (await response.json().catch(() => null)) as { message?: string; details?: { reason?: string } | null } | null;
  return body?.details?.reason && body.message ? body.message : fallback;
}

/** The dashboard lists conversations first: a key without that scope is told so, by name, before any page is shown. */
async function missingScope(response: Response): Promise<string> {
  const body = (await response.json().catch(() => null)) as { error?: string; details?: { scope?: string } | null } | null;
  const scope = body?.error === 'insufficient_scope' ? body.details?.scope : undefined;
  if (!scope) return `The server refused this key (${response.status}).`;
  return `This key lacks the scope ${scope}, which the dashboard needs to list conversations. Sign in with a key that has it.`;
}

function SignIn({ onKey, message }: { onKey: (key: string) => void; message: string | null }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(message);
  const [busy, setBusy] = useState(false);
  return (
    <form
      class="sign-in"
      data-testid="sign-in"
      onSubmit={async (event) => {
        event.preventDefault();
        setBusy(true);
        setError(null);
        try {
          const response = await fetch('/info', { headers: { authorization: `Bearer ${key}` } });
          if (response.status === 401) setError(await refusal(response, 'That key is not valid.'));
          else if (response.status === 403) setError(await missingScope(response));
          else if (!response.ok) setError(`The server answered ${response.status}.`);
          else onKey(key);
        } catch {
          setError('The server cannot be reached.');
        } finally {
          setBusy(false);
        }
      }}
    >
      <h1>agentd</h1>
      <p>Sign in with an API key: the master key (AGENTD_MASTER_KEY) or a key made with POST /keys. It is kept in this tab only.</p>
      <input type="password" name="key" autocomplete="current-password" placeholder="API key" value={key} onInput={(event) => setKey(event.currentTarget.value)} autofocus required />
      <button type="submit" class="primary" disabled={busy}>
        Sign in
      </button>
      {error ? <div class="error-text">{error}</div> : null}
    </form>
  );
}

function App() {
  const [key, setKey] = useState<string | null>(storedKey());
  const [signedOut, setSignedOut] = useState<string | null>(null);
  const [route, setRoute] = useState(parseHash());
  const [features, setFeatures] = useState<Features>({ changes: false, answer: false });

  useEffect(() => {
    const onHash = () => setRoute(parseHash());
    addEventListener('hashchange', onHash);
    void loadFeatures().then(setFeatures);
    return () => removeEventListener('hashchange', onHash);
  }, []);

  const signOut = (reason: string | null) => {
    storeKey(null);
    sessionStorage.clear();
    setSignedOut(reason);
    setKey(null);
  };
  const api = useMemo(() => (key ? new Api(key, () => signOut('The key stopped working: sign in again.')) : null), [key]);

  if (!api) {
    return (
      <SignIn
        message={signedOut}
        onKey={(value) => {
          storeKey(value);
          setKey(value);
        }}
      />
    );
  }
  const go = (id: string, tab: Tab = 'timeline') => {
    location.hash = `#/c/${id}/${tab}`;
  };
  return (
    // On a narrow screen the list and a conversation take the whole width in turn (app.css).
    <div class={route.id ? 'layout showing-conversation' : 'layout'}>
      <ConversationList api={api} selected={route.id} onSelect={(id) => go(id)} />
      <main class="main">
        <div class="topbar">
          {route.id ? (
            <a class="back" href="#/" data-testid="back">
              ← Conversations
            </a>
          ) : null}
          <span class="spacer" />
          <a href="/docs" target="_blank" rel="noopener">
            API docs
          </a>
          <button class="link" onClick={() => signOut(null)}>
            Sign out
          </button>
        </div>
        {route.id ? (
          <ErrorBoundary key={route.id}>
            <ConversationView api={api} features={features} id={route.id} tab={route.tab} onTab={(tab) => go(route.id!, tab)} />
          </ErrorBoundary>
        ) : (
          <div class="main-empty">Pick a conversation, or create one.</div>
        )}
      </main>
    </div>
  );
}

render(<App />, document.getElementById('app')!);
