import type { UserAnswer } from '../tools/tool.js';

/**
 * A promise for the answer to one question: `answer` settles it (the first answer wins), the
 * abort signal rejects it. Nothing polls and no timer runs while it waits.
 */
export function waitForAnswer(signal: AbortSignal): { promise: Promise<UserAnswer>; answer: (answer: UserAnswer) => void } {
  let answer!: (value: UserAnswer) => void;
  const promise = new Promise<UserAnswer>((resolve, reject) => {
    const onAbort = () => reject(signal.reason ?? new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    answer = (value) => {
      signal.removeEventListener('abort', onAbort);
      resolve(value);
    };
  });
  return { promise, answer };
}
