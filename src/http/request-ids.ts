import { randomUUID } from 'node:crypto';

const COUNTER_SPACE = 2 ** 48;

/**
 * Ids for requests that do not bring their own `x-request-id`: UUIDs in the version 4 layout
 * whose first 74 random bits are drawn once per process and whose last 12 hex digits count
 * requests from a random start. Unique within a process and, by the random part, across
 * processes and restarts. crypto.randomUUID per request cost a random draw every 128 ids and a
 * string of twenty pieces each (~0.6 KB of garbage); a request id needs to be unique, not
 * unpredictable (it grants nothing).
 */
export function requestIdGenerator(): () => string {
  // xxxxxxxx-xxxx-4xxx-[89ab]xxx- : the version and variant digits stay those of a random UUID.
  const prefix = randomUUID().slice(0, 24);
  let counter = Number.parseInt(randomUUID().replaceAll('-', '').slice(0, 12), 16);
  return () => {
    counter = (counter + 1) % COUNTER_SPACE;
    return prefix + counter.toString(16).padStart(12, '0');
  };
}
