import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { ConversationRecord, type ConversationRepository, type LoadedConversations } from '../core/conversations/conversation-record.js';
import { SENSITIVE_HEADER } from '../core/schemas/llm-config.js';
import type { SecretBox } from '../core/secrets/secret-box.js';
import type { HookMatcher, HookPoint, Hooks } from '../core/schemas/tool-control.js';
import type { McpServers } from '../core/schemas/mcp-servers.js';
import { DamagedDataError, StorageFullError } from '../core/errors.js';
import { isOutOfSpace } from './disk-space.js';

const FILE = 'conversation.json';
const LOAD_CONCURRENCY = 64;

/** The record as written to disk: secret values and the LLM key sealed with the SecretBox. */
type DiskRecord = Omit<ConversationRecord, 'secrets' | 'llm'> & {
  llm: (Omit<NonNullable<ConversationRecord['llm']>, 'api_key'> & { api_key: string | null }) | null;
  secrets: Record<string, string>;
};

/** `<dir>/<id>/conversation.json`, written with temp file + rename. */
export class FileConversationRepository implements ConversationRepository {
  constructor(
    private readonly dir: string,
    private readonly box: SecretBox,
    private readonly options: { fsync?: boolean; storageError?: (error: unknown) => unknown } = {},
  ) {
    fs.mkdirSync(dir, { recursive: true });
  }

  async loadAll(): Promise<LoadedConversations> {
    const ids = (await fs.promises.readdir(this.dir, { withFileTypes: true })).filter((entry) => entry.isDirectory()).map((entry) => entry.name);
    const loaded: LoadedConversations = { records: [], damaged: [] };
    for (let i = 0; i < ids.length; i += LOAD_CONCURRENCY) {
      const batch = await Promise.all(
        ids.slice(i, i + LOAD_CONCURRENCY).map(async (id) => {
          try {
            return await this.load(id);
          } catch (error) {
            if (error instanceof DamagedDataError) return { id, error };
            throw error;
          }
        }),
      );
      for (const result of batch) {
        if (!result) continue;
        if ('error' in result) loaded.damaged.push(result);
        else loaded.records.push(result);
      }
    }
    return loaded;
  }

  save(record: ConversationRecord): void {
    const dir = path.join(this.dir, record.id);
    fs.mkdirSync(dir, { recursive: true });
    const target = path.join(dir, FILE);
    const temp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      const fd = fs.openSync(temp, 'w', 0o600);
      try {
        const text = Buffer.from(JSON.stringify(this.seal(record)));
        let written = 0;
        while (written < text.length) written += fs.writeSync(fd, text, written);
        if (this.options.fsync) fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      fs.renameSync(temp, target);
    } catch (error) {
      // The old record stays as it was; the partial temp file goes.
      fs.rmSync(temp, { force: true });
      throw this.options.storageError ? this.options.storageError(error) : isOutOfSpace(error) ? new StorageFullError() : error;
    }
  }

  remove(id: string): void {
    const dir = path.join(this.dir, id);
    // The record goes first: a crash midway leaves a directory without a record, cleaned at load.
    fs.rmSync(path.join(dir, FILE), { force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  }

  private async load(id: string): Promise<ConversationRecord | undefined> {
    const dir = path.join(this.dir, id);
    let text: string;
    try {
      text = await fs.promises.readFile(path.join(dir, FILE), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      // Half-deleted or never completed: nothing was acknowledged for it.
      await fs.promises.rm(dir, { recursive: true, force: true });
      return undefined;
    }
    for (const leftover of await fs.promises.readdir(dir)) {
      if (leftover.endsWith('.tmp')) await fs.promises.rm(path.join(dir, leftover), { force: true });
    }
    const file = path.join(dir, FILE);
    const damaged = (reason: string) => new DamagedDataError({ file: FILE, line: null, reason }, file);
    let disk: DiskRecord;
    try {
      disk = JSON.parse(text) as DiskRecord;
    } catch (error) {
      throw damaged(`not valid JSON (${(error as Error).message})`);
    }
    if (typeof disk !== 'object' || disk === null || disk.id !== id || typeof disk.status !== 'string' || typeof disk.created_at !== 'string' || typeof disk.workdir !== 'string') {
      throw damaged('not a conversation record of this directory');
    }
    let unsealed: ConversationRecord;
    try {
      unsealed = this.unseal(disk);
    } catch {
      throw damaged('its sealed secrets cannot be decrypted with this server\'s secret key');
    }
    // Checked once in plain text, with the limits of the fields as a client sends them.
    const parsed = ConversationRecord.safeParse(unsealed);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw damaged(`not a valid conversation record (${issue.path.join('.') || 'record'}: ${issue.message})`);
    }
    return parsed.data;
  }

  private seal(record: ConversationRecord): DiskRecord {
    const secrets: Record<string, string> = {};
    for (const [name, value] of Object.entries(record.secrets)) secrets[name] = this.box.encrypt(value);
    const llm = record.llm
      ? { ...record.llm, api_key: record.llm.api_key ? this.box.encrypt(record.llm.api_key) : null, extra_headers: sealHeaders(record.llm.extra_headers, (value) => this.box.encrypt(value)) }
      : null;
    const retired = record.retired_secrets?.map(([name, value]): [string, string] => [name, this.box.encrypt(value)]);
    const hooks = record.hooks && sealHookSecrets(record.hooks, (value) => this.box.encrypt(value));
    const mcp = record.mcp_servers && sealMcpValues(record.mcp_servers, (value) => this.box.encrypt(value));
    return { ...record, llm, secrets, ...(retired && { retired_secrets: retired }), ...(hooks && { hooks }), ...(mcp && { mcp_servers: mcp }) };
  }

  private unseal(disk: DiskRecord): ConversationRecord {
    const secrets: Record<string, string> = {};
    for (const [name, value] of Object.entries(disk.secrets ?? {})) secrets[name] = this.box.decrypt(value);
    const llm = disk.llm
      ? { ...disk.llm, api_key: disk.llm.api_key ? this.box.decrypt(disk.llm.api_key) : null, extra_headers: sealHeaders(disk.llm.extra_headers, (value) => this.box.decrypt(value)) }
      : null;
    const retired = disk.retired_secrets?.map(([name, value]): [string, string] => [name, this.box.decrypt(value)]);
    const hooks = disk.hooks && sealHookSecrets(disk.hooks, (value) => this.box.decrypt(value));
    const mcp = disk.mcp_servers && sealMcpValues(disk.mcp_servers, (value) => this.box.decrypt(value));
    return { ...disk, llm, secrets, ...(retired && { retired_secrets: retired }), ...(hooks && { hooks }), ...(mcp && { mcp_servers: mcp }) };
  }
}

/** Values of auth-like `extra_headers` are sealed at rest like `api_key`; a record from before they existed has none. */
function sealHeaders(headers: Record<string, string> | null | undefined, transform: (value: string) => string): Record<string, string> | null {
  if (!headers) return null;
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, SENSITIVE_HEADER.test(name) ? transform(value) : value]));
}

/** An http hook's signing secret is sealed at rest like the conversation's secrets. */
function sealHookSecrets(hooks: Hooks, transform: (value: string) => string): Hooks {
  const out: Hooks = {};
  for (const [point, matchers] of Object.entries(hooks) as [HookPoint, HookMatcher[]][]) {
    out[point] = matchers.map((matcher) => ({
      ...matcher,
      hooks: matcher.hooks.map((hook) => (hook.type === 'http' && hook.secret !== undefined ? { ...hook, secret: transform(hook.secret) } : hook)),
    }));
  }
  return out;
}

/** MCP env and header values are secrets: sealed at rest. */
function sealMcpValues(servers: McpServers, transform: (value: string) => string): McpServers {
  const seal = (values: Record<string, string> | undefined) => values && Object.fromEntries(Object.entries(values).map(([key, value]) => [key, transform(value)]));
  const out: McpServers = {};
  for (const [name, server] of Object.entries(servers)) {
    out[name] = 'command' in server ? { ...server, ...(server.env && { env: seal(server.env)! }) } : { ...server, ...(server.headers && { headers: seal(server.headers)! }) };
  }
  return out;
}
