import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface ReceivedWebhook {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The parsed body: `{ conversation_id, event }`. */
  json: { conversation_id: string; event: { id: string; seq: number; kind: string; [key: string]: unknown } };
  at: number;
}

/** What the receiver does with request number `n` (1, 2, 3…): answer with a status, or hang, or drop the connection. */
export type Reply = number | { status: number; headers?: Record<string, string> } | 'hang' | 'drop';

/** A webhook receiver on 127.0.0.1 (a real listener, as the delivery side sees it). */
export class WebhookReceiver {
  readonly requests: ReceivedWebhook[] = [];
  /** Requests answered 2xx, deduplicated by `webhook-id` (first arrival kept), in arrival order. */
  readonly delivered: ReceivedWebhook[] = [];
  reply: (n: number, request: ReceivedWebhook) => Reply = () => 200;
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: http.Server,
    readonly port: number,
  ) {
    server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  static async start(options: { port?: number; reply?: (n: number, request: ReceivedWebhook) => Reply } = {}): Promise<WebhookReceiver> {
    let receiver: WebhookReceiver | undefined;
    const server = http.createServer((req, res) => receiver!.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
    });
    receiver = new WebhookReceiver(server, (server.address() as AddressInfo).port);
    if (options.reply) receiver.reply = options.reply;
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  /** Event seqs delivered (after dedupe). */
  get seqs(): number[] {
    return this.delivered.map((request) => request.json.event.seq);
  }

  async waitFor(predicate: () => boolean | Promise<boolean>, what: string, timeoutMs = 8_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await predicate())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (${this.requests.length} requests, delivered seqs ${JSON.stringify(this.seqs)})`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: ReceivedWebhook['json'];
      try {
        json = JSON.parse(body) as ReceivedWebhook['json'];
      } catch {
        json = { conversation_id: '', event: { id: '', seq: 0, kind: '' } };
      }
      const request: ReceivedWebhook = { path: req.url ?? '', headers: req.headers, body, json, at: Date.now() };
      this.requests.push(request);
      const reply = this.reply(this.requests.length, request);
      if (reply === 'hang') return;
      if (reply === 'drop') {
        req.socket.destroy();
        return;
      }
      const { status, headers } = typeof reply === 'number' ? { status: reply, headers: {} } : reply;
      if (status >= 200 && status < 300 && !this.delivered.some((seen) => seen.headers['webhook-id'] === req.headers['webhook-id'])) this.delivered.push(request);
      res.writeHead(status, { 'content-type': 'text/plain', ...headers }).end('ok');
    });
  }
}
