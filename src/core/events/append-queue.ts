/**
 * Runs tasks one at a time per key, in call order: a conversation's appends are masked, stored
 * and read back in the order they were made, whatever the store's own latency, while different
 * conversations never wait for each other.
 */
export class AppendQueue {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T> | T): Promise<T> {
    const previous = this.tails.get(key);
    const result = previous ? previous.then(task, task) : Promise.resolve().then(task);
    const tail = result.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}
