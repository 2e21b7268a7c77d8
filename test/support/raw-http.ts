/**
 * HTTP requests with the path sent exactly as given: fetch (WHATWG URL) resolves `.`/`..`
 * segments and their `%2e` forms before sending, which would hide what the server does with them.
 */
import http from 'node:http';

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  text: string;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });

export function rawRequest(options: { url: string; method: string; path: string; headers?: Record<string, string>; body?: Buffer | string }): Promise<RawResponse> {
  const target = new URL(options.url);
  return new Promise((resolve, reject) => {
    const request = http.request(
      { agent, host: target.hostname, port: target.port, method: options.method, path: options.path, headers: options.headers ?? {} },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const body = Buffer.concat(chunks);
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body, text: body.toString('utf8') });
        });
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(options.body);
  });
}
