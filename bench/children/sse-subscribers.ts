/**
 * P2's subscribers, in their own process (the second core): `count` SSE connections to one
 * conversation's stream. Each notes the arrival time (CLOCK_MONOTONIC, shared with the parent)
 * of every `sampleEvery`-th seq, and checks that seqs arrive in order without gaps.
 *
 * Messages from the parent: start → (ready) ... (done) → appendTimes → (latency).
 */
import http from 'node:http';
import { monotonicMs, summarize } from '../support/stats.js';

interface Start {
  type: 'start';
  url: string;
  headers: Record<string, string>;
  count: number;
  events: number;
  sampleEvery: number;
}

interface Subscriber {
  carry: string;
  lastSeq: number;
  /** Arrival time of seq k * sampleEvery at index k - 1. */
  arrivals: Float64Array;
  faults: string[];
  request: http.ClientRequest;
}

let subscribers: Subscriber[] = [];
let config: Start;
let finished = 0;
let lastArrival = 0;

function send(message: unknown): void {
  process.send!(message);
}

function onChunk(subscriber: Subscriber, chunk: string): void {
  const text = subscriber.carry + chunk;
  let lineStart = 0;
  for (;;) {
    const newline = text.indexOf('\n', lineStart);
    if (newline === -1) break;
    if (text.startsWith('id: ', lineStart)) onSeq(subscriber, Number(text.slice(lineStart + 4, newline)));
    else if (text.startsWith('event: stream_', lineStart)) subscriber.faults.push(text.slice(lineStart + 7, newline));
    lineStart = newline + 1;
  }
  subscriber.carry = text.slice(lineStart);
}

function onSeq(subscriber: Subscriber, seq: number): void {
  const now = monotonicMs();
  if (seq !== subscriber.lastSeq + 1) subscriber.faults.push(`seq ${seq} after ${subscriber.lastSeq}`);
  subscriber.lastSeq = seq;
  if (seq % config.sampleEvery === 0) subscriber.arrivals[seq / config.sampleEvery - 1] = now;
  if (seq === config.events) {
    lastArrival = Math.max(lastArrival, now);
    finished += 1;
    if (finished === subscribers.length) send({ type: 'done', lastArrival, faults: subscribers.flatMap((s) => s.faults).slice(0, 20), faulty: subscribers.filter((s) => s.faults.length).length });
  }
}

function connect(): Promise<Subscriber> {
  return new Promise((resolve, reject) => {
    const subscriber: Subscriber = { carry: '', lastSeq: 0, arrivals: new Float64Array(Math.floor(config.events / config.sampleEvery)), faults: [], request: undefined as never };
    subscriber.request = http.get(config.url, { agent: false, headers: { accept: 'text/event-stream', ...config.headers } }, (response) => {
      if (response.statusCode !== 200) return reject(new Error(`stream answered ${response.statusCode}`));
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => onChunk(subscriber, chunk));
      response.on('error', () => undefined);
      resolve(subscriber);
    });
    subscriber.request.on('error', reject);
  });
}

process.on('message', async (message: Start | { type: 'appendTimes'; times: number[] } | { type: 'stop' }) => {
  if (message.type === 'start') {
    config = message;
    for (let i = 0; i < config.count; i += 50) subscribers.push(...(await Promise.all(Array.from({ length: Math.min(50, config.count - i) }, connect))));
    send({ type: 'ready' });
  } else if (message.type === 'appendTimes') {
    const latencies: number[] = [];
    for (const subscriber of subscribers) {
      for (let k = 0; k < subscriber.arrivals.length; k++) if (subscriber.arrivals[k]! > 0) latencies.push(subscriber.arrivals[k]! - message.times[k]!);
    }
    send({ type: 'latency', summary: summarize(latencies) });
  } else {
    for (const subscriber of subscribers) subscriber.request.destroy();
    subscribers = [];
    process.exit(0);
  }
});
