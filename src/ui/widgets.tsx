import type { StreamState } from './live-stream.js';
import type { Usage } from './types.js';

export function StatusBadge({ status }: { status: string }) {
  return (
    <span class={`status status-${status}`} data-testid="status">
      {status.replace(/_/g, ' ')}
    </span>
  );
}

export function UsageLine({ usage }: { usage: Usage }) {
  return (
    <span class="usage" data-testid="usage" title="prompt tokens ↑, completion tokens ↓, cost">
      ↑{usage.prompt_tokens.toLocaleString()} ↓{usage.completion_tokens.toLocaleString()}
      {usage.cost ? ` · $${usage.cost.toFixed(4)}` : ''}
    </span>
  );
}

const LABELS: Record<StreamState, string> = { connecting: 'connecting…', live: 'live', reconnecting: 'reconnecting…' };

export function ConnectionState({ state, name }: { state: StreamState; name: string }) {
  return (
    <span class={`connection connection-${state}`} data-testid={`${name}-connection`} data-state={state}>
      <span class="dot" /> {LABELS[state]}
    </span>
  );
}

export function formatBytes(size: number): string {
  if (size < 1024) return `${size} B`;
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KB`;
  return `${(size / 1024 / 1024).toFixed(1)} MB`;
}
