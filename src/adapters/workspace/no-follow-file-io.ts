/**
 * Reading and writing a file without following a symlink in its final component (O_NOFOLLOW),
 * which closes the race between resolving a path and using it for that component; the
 * directories above are pinned by the caller (pin-path.ts).
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';

export async function readBytesNoFollow(filePath: string, maxBytes: number): Promise<{ bytes?: Buffer; size: number }> {
  const handle = await open(filePath, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const stats = await handle.stat();
    if (stats.isDirectory()) throw Object.assign(new Error('Is a directory'), { code: 'EISDIR' });
    if (stats.size > maxBytes) return { size: stats.size };
    const bytes = await handle.readFile();
    return bytes.length > maxBytes ? { size: bytes.length } : { bytes, size: bytes.length };
  } finally {
    await handle.close();
  }
}

/**
 * Writes a file the agent will own: given to `owner` (the workdir's, when the server runs as root)
 * and without set-id bits, which a write by root would otherwise leave in place.
 */
export async function writeBytesNoFollow(filePath: string, data: Buffer | string, owner?: { uid: number; gid: number }): Promise<void> {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;
  const handle = await open(filePath, flags, 0o666);
  try {
    await handle.writeFile(data);
    const stats = await handle.stat();
    if (owner && process.geteuid?.() === 0 && (stats.uid !== owner.uid || stats.gid !== owner.gid)) await handle.chown(owner.uid, owner.gid);
    if ((stats.mode & 0o6000) !== 0) await handle.chmod(stats.mode & 0o1777);
  } finally {
    await handle.close();
  }
}
