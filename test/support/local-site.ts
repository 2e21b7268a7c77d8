/**
 * A small HTTP server on 127.0.0.1 standing in for a site or a provider's API: the test's handler
 * answers, every request is logged with its headers and body, and `close` drops kept-alive
 * connections so the test ends promptly.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SiteRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface LocalSite {
  url: string;
  requests: SiteRequest[];
  close(): Promise<void>;
}

export async function startLocalSite(handle: (request: SiteRequest, res: http.ServerResponse) => void): Promise<LocalSite> {
  const requests: SiteRequest[] = [];
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const request = { method: req.method ?? '', path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
    requests.push(request);
    handle(request, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
