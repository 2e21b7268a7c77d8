/**
 * A throwaway PostgreSQL cluster for one test file: `initdb` into the test's own temp dir,
 * `pg_ctl start` on a free loopback port (its socket in the same dir), trust auth, fsync off.
 * Debian's `postgresql` package provides the binaries (`.ci/run` installs it); where they are
 * missing, `findPostgres()` says why and the tests skip with that one line.
 *
 * PostgreSQL refuses to run as root: as root, the cluster runs as the `postgres` user (the
 * package creates it), and only the cluster's own directory is handed to that user.
 *
 * The cluster dies with the test process: a watchdog stops it and removes its dir if the test
 * is killed before `stop()` (see watchdog.ts).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './free-port.js';
import { quote, watchdog } from './watchdog.js';

const run = promisify(execFile);

export interface PostgresBinaries {
  bin: string;
  /** The OS user the cluster runs as when we are root (null: ourselves). */
  runAs: string | null;
}

export interface PostgresCluster {
  /** A superuser URL of the `postgres` database. */
  url: string;
  port: number;
  /** A URL of a new, empty database on this cluster. */
  createDatabase(name?: string): Promise<string>;
  /** Stops the server (`pg_ctl stop -m fast`): its port refuses connections until `resume()`. */
  pause(): Promise<void>;
  /** Starts it again on the same data dir and port. */
  resume(): Promise<void>;
  stop(): Promise<void>;
}

/** The PostgreSQL binaries, or the reason the tests that need them skip. */
export function findPostgres(): PostgresBinaries | { missing: string } {
  const candidates = ['/usr/lib/postgresql'].flatMap((root) => {
    try {
      return fs
        .readdirSync(root)
        .sort((a, b) => Number(b) - Number(a))
        .map((version) => path.join(root, version, 'bin'));
    } catch {
      return [];
    }
  });
  const bin = candidates.find((dir) => fs.existsSync(path.join(dir, 'initdb')) && fs.existsSync(path.join(dir, 'pg_ctl')));
  if (!bin) return { missing: 'PostgreSQL is not installed (no initdb/pg_ctl under /usr/lib/postgresql; `apt-get install postgresql`)' };
  if (process.getuid?.() !== 0) return { bin, runAs: null };
  try {
    fs.accessSync('/usr/sbin/runuser');
  } catch {
    return { missing: 'running as root needs runuser (util-linux) to start PostgreSQL as the postgres user' };
  }
  const hasUser = fs.readFileSync('/etc/passwd', 'utf8').split('\n').some((line) => line.startsWith('postgres:'));
  if (!hasUser) return { missing: 'running as root, PostgreSQL needs the postgres user (created by the postgresql package)' };
  return { bin, runAs: 'postgres' };
}

export async function startPostgres(binaries: PostgresBinaries): Promise<PostgresCluster> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-pg-'));
  const dataDir = path.join(root, 'data');
  const socketDir = path.join(root, 'socket');
  fs.mkdirSync(socketDir);
  if (binaries.runAs) {
    // Only the cluster's own temp dir is given to the postgres user.
    fs.chmodSync(root, 0o755);
    await run('chown', ['-R', binaries.runAs, root]);
  }
  const tool = (name: string, args: string[]) =>
    binaries.runAs ? run('/usr/sbin/runuser', ['-u', binaries.runAs, '--', path.join(binaries.bin, name), ...args]) : run(path.join(binaries.bin, name), args);
  await tool('initdb', ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
  const port = await freePort();
  const options = [`-p ${port}`, `-k ${socketDir}`, '-c listen_addresses=127.0.0.1', '-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off', '-c max_connections=200'].join(' ');
  const pgCtl = path.join(binaries.bin, 'pg_ctl');
  const stopCommand = `${binaries.runAs ? `/usr/sbin/runuser -u ${binaries.runAs} -- ` : ''}${quote(pgCtl)} stop -D ${quote(dataDir)} -m immediate -w -t 30 >/dev/null 2>&1; rm -rf ${quote(root)}`;
  const guard = watchdog(stopCommand);
  await tool('pg_ctl', ['start', '-D', dataDir, '-w', '-t', '60', '-l', path.join(root, 'postgres.log'), '-o', options]);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let created = 0;
  return {
    url,
    port,
    async createDatabase(name = `test_${process.pid}_${++created}`) {
      await tool('psql', ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-d', 'postgres', '-v', 'ON_ERROR_STOP=1', '-c', `CREATE DATABASE ${name}`]);
      return `postgres://postgres@127.0.0.1:${port}/${name}`;
    },
    async pause() {
      await tool('pg_ctl', ['stop', '-D', dataDir, '-m', 'fast', '-w', '-t', '60']);
    },
    async resume() {
      await tool('pg_ctl', ['start', '-D', dataDir, '-w', '-t', '60', '-l', path.join(root, 'postgres.log'), '-o', options]);
    },
    async stop() {
      guard.cancel();
      try {
        await tool('pg_ctl', ['stop', '-D', dataDir, '-m', 'immediate', '-w', '-t', '30']);
      } finally {
        fs.rmSync(root, { recursive: true, force: true });
      }
    },
  };
}
