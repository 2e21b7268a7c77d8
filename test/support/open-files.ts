import fs from 'node:fs';

/** The paths this process holds open (its descriptors' targets) that contain `part`. */
export function openFilesWith(part: string): string[] {
  const held: string[] = [];
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      const target = fs.readlinkSync(`/proc/self/fd/${fd}`);
      if (target.includes(part)) held.push(target);
    } catch {
      // closed meanwhile (the readdir's own descriptor)
    }
  }
  return held;
}
