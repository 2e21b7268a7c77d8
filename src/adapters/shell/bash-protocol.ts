/**
 * How the session talks to bash. Each command is one line `eval $'...'` (any text, quoted on one
 * line) with redirections, followed by a line calling __agentd_done, which prints a sentinel
 * carrying a per-command nonce, the exit code, a background pid, its log file and $PWD on a saved
 * copy of stdout (so even `exec >/dev/null` cannot hide it). The running command reads stdin from
 * fd 3, a channel of its own, so a command reading stdin never eats the next command line.
 */

/** Quotes any text as one bash word on one line (ANSI-C `$'...'`): newlines and quotes are safe. */
export function bashQuote(text: string): string {
  let quoted = "$'";
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    if (char === '\\' || char === "'") quoted += `\\${char}`;
    else if (code < 0x20 || code === 0x7f) quoted += `\\x${code.toString(16).padStart(2, '0')}`;
    else quoted += char;
  }
  return `${quoted}'`;
}

/** True for `cmd &` (a background job), false for `a &&`, `2>&`, `|&` and an escaped `\&`. */
export function endsWithBackgroundAmpersand(command: string): boolean {
  return /(^|[^&|>\\])&$/.test(command.trimEnd());
}

export type ScanEvent = { kind: 'text'; text: string } | { kind: 'sentinel'; nonce: string; fields: string[] };

export const sentinelStart = (nonce: string): string => `__AGENTD_${nonce}_S:`;
export const sentinelEnd = (nonce: string): string => `__AGENTD_${nonce}_E\n`;

/**
 * Splits the shell's output stream into plain text and sentinel records
 * (`__AGENTD_<nonce>_S:<fields separated by \x1f>__AGENTD_<nonce>_E\n`). Only the given nonces
 * are recognised, so no output can fake a sentinel. Text that may be the start of a sentinel is
 * held back until the next chunk tells.
 */
export class SentinelScanner {
  private pending = '';

  push(text: string, nonces: string[]): ScanEvent[] {
    this.pending += text;
    const events: ScanEvent[] = [];
    const pushText = (value: string): void => void (value !== '' && events.push({ kind: 'text', text: value }));
    for (;;) {
      const hit = nonces
        .map((nonce) => ({ nonce, index: this.pending.indexOf(sentinelStart(nonce)) }))
        .filter((candidate) => candidate.index >= 0)
        .sort((a, b) => a.index - b.index)[0];
      if (!hit) {
        const keep = partialMarkerLength(this.pending, nonces.map(sentinelStart));
        pushText(this.pending.slice(0, this.pending.length - keep));
        this.pending = this.pending.slice(this.pending.length - keep);
        return events;
      }
      pushText(this.pending.slice(0, hit.index));
      this.pending = this.pending.slice(hit.index);
      const end = this.pending.indexOf(sentinelEnd(hit.nonce));
      if (end < 0) return events;
      const fields = this.pending.slice(sentinelStart(hit.nonce).length, end).split('\x1f');
      this.pending = this.pending.slice(end + sentinelEnd(hit.nonce).length);
      events.push({ kind: 'sentinel', nonce: hit.nonce, fields });
    }
  }

  /** Whatever is held back (the stream ended). */
  flush(): string {
    const rest = this.pending;
    this.pending = '';
    return rest;
  }
}

/** How many characters at the end of `text` could be the beginning of one of `markers`. */
export function partialMarkerLength(text: string, markers: string[]): number {
  const longest = Math.max(0, ...markers.map((marker) => marker.length - 1));
  for (let length = Math.min(longest, text.length); length > 0; length -= 1) {
    const tail = text.slice(text.length - length);
    if (markers.some((marker) => marker.startsWith(tail))) return length;
  }
  return 0;
}

/**
 * Sent once after start: stderr joins stdout; {__agentd_fd} keeps a copy of stdout for sentinels;
 * no history expansion (`!` in strings), no prompts; aliases on. __agentd_done prints the sentinel
 * (for `cmd &`: moves the log to .agentd/bg-<pid>.log, or shows it if no job started after all).
 */
export const INIT_SCRIPT = [
  'exec 2>&1 {__agentd_fd}>&1; set +H +o history; unset HISTFILE PROMPT_COMMAND; PS1=; PS2=; PS0=; shopt -s expand_aliases',
  // Discard input that an earlier command left unread, so it cannot reach the next command.
  "__agentd_drain() { local s=$?; while read -r -t 0 -u 3; do IFS= read -r -d '' -t 0.01 -u 3 __agentd_junk; (( $? == 1 )) && break; done 2>/dev/null; return $s; }",
  // The agent area: .agentd/ in the workdir (bash starts there), ignored by git through its own .gitignore;
  // made on first use. Background logs go there (or to $TMPDIR if it cannot be made); logs and saved outputs untouched for a day are removed.
  "__agentd_area=$PWD/.agentd; __agentd_ready() { __agentd_logdir=${TMPDIR:-/tmp}; command mkdir -p -- \"$__agentd_area\" 2>/dev/null && { [ -e \"$__agentd_area/.gitignore\" ] || printf '*\\n' > \"$__agentd_area/.gitignore\"; } 2>/dev/null && __agentd_logdir=$__agentd_area; }",
  "[ -d \"$__agentd_area\" ] && command find \"$__agentd_area\" -maxdepth 1 \\( -name 'bg-*.log' -o -name 'output-*.txt' \\) -mmin +1440 -delete 2>/dev/null",
  '__agentd_done() { local s=$? p= l=; set +m; if [ "$2" = bg ]; then if [ "${!:-}" != "$__agentd_prevbg" ]; then p=$!; l="$__agentd_logdir/bg-$p.log"; ' +
    'command mv -f -- "$3" "$l" 2>/dev/null || l=$3; else command cat -- "$3"; command rm -f -- "$3"; fi; fi; ' +
    `printf '${sentinelStart('%s')}%s\\x1f%s\\x1f%s\\x1f%s${sentinelEnd('%s').trimEnd()}\\n' "$1" "$s" "$p" "$l" "$PWD" "$1" >&"$__agentd_fd"; return $s; }`,
].join('\n');

/** The two lines that run `command` and report its end; `prefix` holds pending `export`s. */
export function commandLines(options: { nonce: string; command: string; prefix: string }): string {
  const { nonce, prefix } = options;
  const quoted = bashQuote(options.command.replaceAll('\0', ''));
  if (!endsWithBackgroundAmpersand(options.command)) {
    return `${prefix}__agentd_drain; eval ${quoted} 0<&3 3<&- {__agentd_fd}>&-\n__agentd_done ${nonce}\n`;
  }
  // A background job gets its own process group (set -m), so C-c for a later command does not
  // reach it, and its output goes to a log file instead of into later results.
  const log = `"\$__agentd_logdir/bg-${nonce}.log"`;
  return `${prefix}__agentd_ready; __agentd_prevbg=\${!:-}; set -m; eval ${quoted} >${log} 2>&1 0</dev/null 3<&- {__agentd_fd}>&-\n__agentd_done ${nonce} bg ${log}\n`;
}
