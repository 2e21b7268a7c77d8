/** How many leading bytes are sniffed for a NUL byte (the same heuristic as git and grep). */
export const BINARY_SNIFF_BYTES = 8192;

/** True when the first bytes contain a NUL byte: treated as binary, never shown to the model. */
export function looksBinary(bytes: Uint8Array): boolean {
  const end = Math.min(bytes.length, BINARY_SNIFF_BYTES);
  for (let index = 0; index < end; index++) {
    if (bytes[index] === 0) return true;
  }
  return false;
}
