/** What came of one POST: a status (any, 3xx included: redirects are not followed) or no response at all. */
export type WebhookResponse = { status: number; error: null } | { status: null; error: string };

export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  /** Aborts the attempt (subscription deleted, server shutting down). */
  signal: AbortSignal;
}

/**
 * Sends one webhook POST. Never throws: timeouts and connection errors come back as `error`.
 * Implementations bound the whole attempt by their own timeout and never follow redirects.
 */
export interface WebhookClient {
  post(request: WebhookRequest): Promise<WebhookResponse>;
  close(): Promise<void>;
}
