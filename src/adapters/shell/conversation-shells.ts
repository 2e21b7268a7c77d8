import type { WarmShells } from '../../core/agent/warm-shells.js';
import type { ShellCreateOptions, ShellFactory, ShellSession } from '../../core/tools/shell-session.js';
import type { ShellLedger } from './shell-ledger.js';

export interface ConversationShellsParts {
  /** What starts a new shell: a bash in the sandbox (BashShellFactory), or a test's own. */
  bash: ShellFactory;
  /** Where every shell started is noted from its spawn to its close. */
  ledger: ShellLedger;
  /** The warm shells, given how to start one (absent when none are kept). */
  warm?: (start: ShellFactory) => WarmShells;
}

/**
 * The one factory a tool call's shell comes from. A conversation's first shell is the warm one
 * started for it when there is one; any other shell is a new one from `bash`, noted in the ledger
 * (so that a crashed server's shells are stopped at the next start). Warm shells are started the
 * same way, so each shell is noted once whichever path made it.
 */
export class ConversationShells implements ShellFactory {
  readonly warm: WarmShells | null;

  constructor(private readonly parts: ConversationShellsParts) {
    this.warm = parts.warm?.({ create: (options) => this.start(options) }) ?? null;
  }

  async create(options: ShellCreateOptions): Promise<ShellSession> {
    if (!this.warm) return this.start(options);
    return (await this.warm.claim(options)) ?? this.start(options);
  }

  /** The ledger keeps naming the shells: the next start stops any that outlived this process. */
  killAllForExit(): void {
    this.parts.bash.killAllForExit?.();
  }

  private start(options: ShellCreateOptions): Promise<ShellSession> {
    return this.parts.ledger.start(this.parts.bash, options);
  }
}
