/**
 * P20's floor: a server that does only what any server must do for a turn of `bash true` then an
 * answer, and nothing else: it answers the POST (202), sends the two LLM requests a turn of
 * agentd sent (their bodies read from a file), runs `true` in a running bash of the conversation
 * (no sandbox), and writes one event on the stream. No log, no store, no checks. Its routes are
 * agentd's: `POST /conversations` (201 `{id}`), `POST /conversations/{id}/messages` (202),
 * `GET /events/stream` (SSE, the run's end as agentd's `state_update`), `GET /health`.
 * `--port N --llm <base url> --bodies <file: a JSON array of the two request bodies>`.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { port: { type: 'string' }, llm: { type: 'string' }, bodies: { type: 'string' } } });
const [firstBody, secondBody] = (JSON.parse(fs.readFileSync(values.bodies!, 'utf8')) as unknown[]).map((body) => JSON.stringify(body));
const agent = new http.Agent({ keepAlive: true });

/** One LLM round trip: the request sent, the whole streamed answer read. */
function complete(body: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = http.request(`${values.llm}/v1/chat/completions`, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (response) => {
      response.on('data', () => {});
      response.on('end', resolve);
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body);
  });
}

/** A conversation's running bash: a command, then a marker it echoes when the command is done. */
class Shell {
  private readonly bash: ChildProcessWithoutNullStreams = spawn('bash', ['--noprofile', '--norc'], { stdio: 'pipe' });
  private output = '';
  private done: (() => void) | undefined;

  constructor() {
    this.bash.stdout.setEncoding('utf8');
    this.bash.stdout.on('data', (chunk: string) => {
      this.output += chunk;
      const end = this.output.indexOf('__done\n');
      if (end < 0) return;
      this.output = this.output.slice(end + '__done\n'.length);
      const done = this.done;
      this.done = undefined;
      done?.();
    });
  }

  run(command: string): Promise<void> {
    return new Promise((resolve) => {
      this.done = resolve;
      this.bash.stdin.write(`${command}; echo __done\n`);
    });
  }

  close(): void {
    this.bash.kill('SIGKILL');
  }
}

const shells = new Map<string, Shell>();
const streams = new Set<http.ServerResponse>();
let conversations = 0;

async function turn(id: string): Promise<void> {
  await complete(firstBody!);
  await shells.get(id)!.run('true');
  await complete(secondBody!);
  const event = `data: ${JSON.stringify({ kind: 'state_update', status: 'idle', conversation_id: id })}\n\n`;
  for (const stream of streams) stream.write(event);
}

const server = http.createServer((request, response) => {
  if (request.method === 'GET' && request.url === '/events/stream') {
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    response.flushHeaders();
    streams.add(response);
    request.on('close', () => streams.delete(response));
    return;
  }
  if (request.method === 'GET') {
    response.end('ok');
    return;
  }
  let body = '';
  request.setEncoding('utf8');
  request.on('data', (chunk: string) => (body += chunk));
  request.on('end', () => {
    JSON.parse(body);
    if (request.url === '/conversations') {
      const id = `c${conversations++}`;
      shells.set(id, new Shell());
      response.writeHead(201, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ id }));
      return;
    }
    const id = request.url!.split('/')[2]!;
    response.writeHead(202, { 'content-type': 'application/json' });
    response.end('{}');
    void turn(id);
  });
});
server.listen(Number(values.port), '127.0.0.1');
process.on('SIGTERM', () => {
  for (const shell of shells.values()) shell.close();
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
