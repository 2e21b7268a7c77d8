/**
 * The page's own small HTTP layer: the key from sessionStorage as a bearer token on fetch, and as
 * `?access_token=` on EventSource URLs (EventSource cannot send headers). Errors arrive in the
 * contract's shape `{error, message, details}` and are thrown as ApiError.
 */
const KEY_STORAGE = 'agentd.key';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export function storedKey(): string | null {
  return sessionStorage.getItem(KEY_STORAGE);
}

export function storeKey(key: string | null): void {
  if (key === null) sessionStorage.removeItem(KEY_STORAGE);
  else sessionStorage.setItem(KEY_STORAGE, key);
}

type Query = Record<string, string | number | boolean | undefined | null>;

export function withQuery(path: string, query: Query = {}): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== null && value !== '') params.set(name, String(value));
  const text = params.toString();
  return text ? `${path}${path.includes('?') ? '&' : '?'}${text}` : path;
}

/** `/conversations/{id}/files/{path}` with each segment of a workdir path encoded. */
export function filePath(conversationId: string, relative: string): string {
  return `/conversations/${conversationId}/files/${relative.split('/').map(encodeURIComponent).join('/')}`;
}

export class Api {
  constructor(
    private readonly key: string,
    private readonly onUnauthorized: () => void,
  ) {}

  async request<T>(method: string, path: string, body?: unknown, query?: Query): Promise<T> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.key}` };
    let payload: BodyInit | undefined;
    if (body instanceof FormData) payload = body;
    else if (body !== undefined) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    const response = await fetch(withQuery(path, query), { method, headers, ...(payload !== undefined ? { body: payload } : {}) });
    if (response.status === 401) this.onUnauthorized();
    if (!response.ok) throw await toError(response);
    if (response.status === 204) return undefined as T;
    const text = await response.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  get<T>(path: string, query?: Query): Promise<T> {
    return this.request<T>('GET', path, undefined, query);
  }

  post<T>(path: string, body: unknown = {}, query?: Query): Promise<T> {
    return this.request<T>('POST', path, body, query);
  }

  put<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>('PUT', path, body);
  }

  delete<T>(path: string, query?: Query): Promise<T> {
    return this.request<T>('DELETE', path, undefined, query);
  }

  /** A file's bytes, fetched with the key (a plain link could not carry it). */
  async download(path: string): Promise<Blob> {
    const response = await fetch(path, { headers: { authorization: `Bearer ${this.key}` } });
    if (!response.ok) throw await toError(response);
    return response.blob();
  }

  /** An EventSource URL: the key travels as `access_token`. */
  streamUrl(path: string, query: Query = {}): string {
    return withQuery(path, { ...query, access_token: this.key });
  }
}

async function toError(response: Response): Promise<ApiError> {
  try {
    const body = (await response.json()) as { error?: string; message?: string };
    return new ApiError(response.status, body.error ?? 'error', body.message ?? response.statusText);
  } catch {
    return new ApiError(response.status, 'error', `${response.status} ${response.statusText}`);
  }
}

/** Routes of this server's OpenAPI document (public), to show features only where they exist. */
export interface Features {
  changes: boolean;
  answer: boolean;
}

export async function loadFeatures(): Promise<Features> {
  try {
    const response = await fetch('/openapi.json');
    const document = (await response.json()) as { paths?: Record<string, unknown> };
    const paths = document.paths ?? {};
    return { changes: '/conversations/{id}/changes' in paths, answer: '/conversations/{id}/answer' in paths };
  } catch {
    return { changes: false, answer: false };
  }
}
