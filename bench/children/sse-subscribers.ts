/**
 * P2's subscribers, in their own process (the second core): `count` SSE connections to one
 * conversation's stream. Each notes the arrival time (CLOCK_MONOTONIC, shared with the parent)
 * of every `sampleEvery`-th seq, and checks that seqs arrive in order without gaps.
 *
 * Messages from the parent: start → (ready) ... (done) → appendTimes → (latency).
 */
import net from 'node:net';
import { SseResponseReader } from '../support/sse-reader.js';
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
  lastSeq: number;
  /** Arrival time of seq k * sampleEvery at index k - 1. */
  arrivals: Float64Array;
  faults: string[];
  socket: net.Socket;
}

let subscribers: Subscriber[] = [];
let config: Start;
let finished = 0;
let lastArrival = 0;
let cpuFrom: NodeJS.CpuUsage | null = null;

function send(message: unknown): void {
  process.send!(message);
}

function onSeq(subscriber: Subscriber, seq: number): void {
  if (seq !== subscriber.lastSeq + 1) subscriber.faults.push(`seq ${seq} after ${subscriber.lastSeq}`);
  subscriber.lastSeq = seq;
  if (seq % config.sampleEvery === 0) subscriber.arrivals[seq / config.sampleEvery - 1] = monotonicMs();
  if (seq === config.events) {
    lastArrival = Math.max(lastArrival, monotonicMs());
    finished += 1;
    if (finished === subscribers.length) send({ type: 'done', lastArrival, cpuMs: cpuMs(), faults: subscribers.flatMap((s) => s.faults).slice(0, 20), faulty: subscribers.filter((s) => s.faults.length).length });
  }
}

function cpuMs(): number {
  const used = process.cpuUsage(cpuFrom ?? undefined);
  return (used.user + used.system) / 1000;
}

/**
 * One subscriber: a raw HTTP/1.1 request on its own connection, the response read as bytes
 * (SseResponseReader: no text decoding, no JSON parsing; every id line is still checked).
 */
function connect(): Promise<Subscriber> {
  return new Promise((resolve, reject) => {
    const url = new URL(config.url);
    const socket = net.connect(Number(url.port), url.hostname);
    const subscriber: Subscriber = { lastSeq: 0, arrivals: new Float64Array(Math.floor(config.events / config.sampleEvery)), faults: [], socket };
    const reader = new SseResponseReader(
      { onId: (id) => onSeq(subscriber, id), onFault: (fault) => subscriber.faults.push(fault) },
      (status) => (status === 200 ? resolve(subscriber) : reject(new Error(`stream answered ${status}`))),
    );
    const headers = Object.entries({ host: url.host, accept: 'text/event-stream', ...config.headers }).map(([name, value]) => `${name}: ${value}\r\n`);
    socket.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\n${headers.join('')}\r\n`);
    socket.on('data', (chunk: Buffer) => reader.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => reject(new Error('stream closed before its head')));
  });
}

process.on('message', async (message: Start | { type: 'mark' } | { type: 'appendTimes'; times: number[] } | { type: 'stop' }) => {
  if (message.type === 'mark') {
    // The CPU this process spends receiving and checking, from here to the last event.
    cpuFrom = process.cpuUsage();
    send({ type: 'marked' });
  } else if (message.type === 'start') {
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
    for (const subscriber of subscribers) subscriber.socket.destroy();
    subscribers = [];
    process.exit(0);
  }
});
