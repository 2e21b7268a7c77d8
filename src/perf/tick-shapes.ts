import { createHook } from 'node:async_hooks';

/** The kept tick objects: never read, only held (see keepTickObjectShapes). */
const kept: object[] = [];

/**
 * Keeps `process.nextTick`'s queue entries on V8's fast path for as long as the server runs.
 *
 * Each nextTick builds `{ [async_id_symbol]: ..., [trigger_async_id_symbol]: ..., callback, args }`:
 * a literal whose keys after the first computed one are defined by V8's runtime, which records the
 * object's shape (hidden class) as it goes so that optimized code can define them inline. Those
 * shapes are held weakly: a full collection that runs while no tick is queued (start-up has
 * several, then the compaction after listen) frees them, the next tick makes new ones, and V8
 * (Node 20's, at least) then marks the sites megamorphic for good. From then on every nextTick
 * (several per HTTP request) takes three calls into V8's runtime, a fifth of the instructions of a
 * `GET /alive` under callgrind, and bare Fastify, which never
 * collects that early, pays none of it.
 *
 * One tick object of each kind (without and with arguments) held for good keeps its shape, and
 * the shapes it was built through, alive. Their ids are taken from an async hook's `init`, the
 * only place Node hands a tick object out; the hook is on only for these two ticks. Call it
 * first thing, before anything that could run a full collection. Where Node has no such hook,
 * nothing is kept and the server runs as before.
 */
export function keepTickObjectShapes(): void {
  let hook;
  try {
    hook = createHook({
      init(_asyncId, type, _triggerAsyncId, resource) {
        if (type === 'TickObject') kept.push(resource);
      },
    });
    hook.enable();
  } catch {
    return;
  }
  try {
    process.nextTick(noop);
    process.nextTick(noop, undefined);
  } finally {
    hook.disable();
  }
}

function noop(): void {}

/** How many tick objects are held (tests). */
export function keptTickObjects(): number {
  return kept.length;
}
