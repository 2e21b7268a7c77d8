/** How hooks reach the outside: a command in the conversation's sandbox, or an HTTP POST (adapters). */
export interface HookTransport {
  /** `bash -c <command>` in the conversation's sandbox and workdir, with its secrets as env and `stdin` on stdin. */
  command(options: { command: string; stdin: string; timeoutMs: number; signal: AbortSignal }): Promise<{ exitCode: number | null; stdout: string; stderr: string; timedOut: boolean }>;
  /** POST `body` as JSON, signed with `secret` (Standard Webhooks) when there is one; the response body as text. */
  http(options: { url: string; body: string; secret: string | null; timeoutMs: number; signal: AbortSignal }): Promise<{ status: number | null; body: string; error: string | null }>;
}
