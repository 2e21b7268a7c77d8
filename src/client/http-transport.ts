import { AgentdConnectionError, AgentdError } from './agentd-error.js';
import type { ErrorBody } from './types.js';

export interface ClientOptions {
  /** The server, e.g. `http://127.0.0.1:8000`. */
  url: string;
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Another fetch (default: the global one). */
  fetch?: typeof fetch;
  /** Headers added to every request. */
  headers?: Record<string, string>;
}

export type QueryValue = string | number | boolean | readonly (string | number)[] | null | undefined;

export interface RequestOptions {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  query?: Record<string, QueryValue>;
  /** JSON-encoded unless it is FormData. */
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** Encodes one path parameter (a file path keeps its slashes). */
export function pathParam(value: string, options: { keepSlashes?: boolean } = {}): string {
  return options.keepSlashes ? value.split('/').map(encodeURIComponent).join('/') : encodeURIComponent(value);
}

/** fetch + the contract's conventions: bearer key, JSON bodies, error bodies turned into AgentdError. */
export class HttpTransport {
  readonly baseUrl: string;
  /** The fetch every request goes through. */
  readonly fetch: typeof fetch;

  constructor(private readonly options: ClientOptions) {
    this.baseUrl = options.url.replace(/\/+$/, '');
    this.fetch = options.fetch ?? ((...args) => globalThis.fetch(...args));
  }

  url(path: string, query?: Record<string, QueryValue>): string {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value === undefined || value === null) continue;
      if (Array.isArray(value)) for (const item of value) params.append(name, String(item));
      else params.append(name, String(value));
    }
    const search = params.toString();
    return `${this.baseUrl}${path}${search ? `?${search}` : ''}`;
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...this.options.headers, ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}), ...extra };
  }

  /** The raw response of a successful request (2xx); an error answer throws AgentdError. */
  async send(path: string, options: RequestOptions = {}): Promise<Response> {
    const isForm = typeof FormData !== 'undefined' && options.body instanceof FormData;
    const hasJson = options.body !== undefined && !isForm;
    let response: Response;
    try {
      response = await this.fetch(this.url(path, options.query), {
        method: options.method ?? 'GET',
        headers: this.headers({ ...(hasJson ? { 'content-type': 'application/json' } : {}), ...options.headers }),
        ...(options.body !== undefined ? { body: isForm ? (options.body as FormData) : JSON.stringify(options.body) } : {}),
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (error) {
      if (options.signal?.aborted) throw error;
      throw new AgentdConnectionError(`cannot reach agentd at ${this.baseUrl}: ${describeError(error)}`, { cause: error });
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }

  /** A JSON answer (null for 204). */
  async json<T>(path: string, options: RequestOptions = {}): Promise<T> {
    const response = await this.send(path, options);
    if (response.status === 204) return null as T;
    const text = await response.text();
    return (text ? JSON.parse(text) : null) as T;
  }
}

export async function errorOf(response: Response): Promise<AgentdError> {
  const text = await response.text().catch(() => '');
  let body: Partial<ErrorBody> = {};
  try {
    body = JSON.parse(text) as ErrorBody;
  } catch {
    // Not the contract's shape (a proxy in between): keep the status and the text.
  }
  return new AgentdError(response.status, {
    error: typeof body.error === 'string' ? body.error : `http_${response.status}`,
    message: typeof body.message === 'string' ? body.message : text.slice(0, 500) || response.statusText,
    details: body.details ?? null,
  });
}

export function describeError(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return cause?.code ?? cause?.message ?? error.message;
  }
  return String(error);
}
