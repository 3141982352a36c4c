import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises'
import type { Socket } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { Toxiproxy } from 'toxiproxy-node-client'
import { DevDbError } from './errors.js'
import { cleanUpOnExit } from './exit-hooks.js'
import { freePort } from './free-port.js'

/** A toxiproxy server and a client for its HTTP API. */
export interface ToxiproxyServer {
  apiUrl: string
  client: Toxiproxy
  /** True when it came from TOXIPROXY_URL; stop() then leaves it alone. */
  external: boolean
  stop(): Promise<void>
}

export interface StartToxiproxyOptions {
  /** API port of the local server; a free one by default. */
  port?: number
}

const VERSION = '2.12.0'
const CACHED_BIN = path.join(os.homedir(), '.cache', 'flushwave', `toxiproxy-server-${VERSION}`)
const READY_TIMEOUT_MS = 10_000
const USE_ANOTHER =
  'set TOXIPROXY_BIN to a toxiproxy-server binary, or TOXIPROXY_URL to a running toxiproxy ' +
  '(`docker compose up -d`; see the top of docker-compose.yml).'
const HOW_TO_AVOID = `Install Go (https://go.dev/dl/) so devdb can build it, ${USE_ANOTHER}`

/** The toxiproxy in TOXIPROXY_URL when it is set, else a local toxiproxy-server on 127.0.0.1. */
export async function startToxiproxy(opts: StartToxiproxyOptions = {}): Promise<ToxiproxyServer> {
  const url = process.env.TOXIPROXY_URL
  if (url) {
    const apiUrl = url.replace(/\/+$/, '')
    return { apiUrl, client: new Toxiproxy(apiUrl), external: true, stop: async () => {} }
  }

  const bin = findServer() ?? (await buildServer())
  const port = opts.port ?? (await freePort())
  const apiUrl = `http://127.0.0.1:${port}`
  // It logs a JSON line per connection; warnings and errors are enough for error messages.
  const child = spawn(bin, ['-host', '127.0.0.1', '-port', String(port)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOG_LEVEL: 'warn' },
  })
  const unhook = cleanUpOnExit(() => child.kill('SIGKILL'))
  let spawnError: Error | undefined
  child.on('error', (error) => (spawnError ??= error))
  let output = ''
  const collect = (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-4000))
  child.stdout?.on('data', collect)
  child.stderr?.on('data', collect)
  // Never keep the process alive on its own; 'exit' kills it if stop() was forgotten.
  child.unref()
  for (const stream of [child.stdout, child.stderr]) (stream as Socket | null)?.unref()

  let stopping: Promise<void> | undefined
  const stop = () =>
    (stopping ??= (async () => {
      unhook()
      await terminate(child)
    })())

  try {
    await waitUntilReady(apiUrl, child, () => output, () => spawnError)
  } catch (error) {
    await stop()
    throw new DevDbError(
      `devdb: toxiproxy-server (${bin}) did not start on ${apiUrl}: ${(error as Error).message}\n` +
        `--- toxiproxy output (tail) ---\n${output.trim()}\n---\nFree the port, or ${USE_ANOTHER}`,
      { cause: error },
    )
  }
  return { apiUrl, client: new Toxiproxy(apiUrl), external: false, stop }
}

/** TOXIPROXY_BIN, toxiproxy-server on PATH, `go install`'s `server`, then the cached build. */
function findServer(): string | undefined {
  const fromEnv = process.env.TOXIPROXY_BIN
  if (fromEnv) return fromEnv
  const onPath = (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter(Boolean)
    .map((dir) => path.join(dir, 'toxiproxy-server'))
    .find(isExecutable)
  if (onPath) return onPath
  const gopath = run('go', ['env', 'GOPATH'])?.trim().split(path.delimiter)[0]
  // `go install …/cmd/server` names the binary just `server`: check that it is toxiproxy's.
  const installed = gopath ? path.join(gopath, 'bin', 'server') : undefined
  if (installed && isExecutable(installed) && run(installed, ['-version'])?.startsWith('toxiproxy-server')) return installed
  return isExecutable(CACHED_BIN) ? CACHED_BIN : undefined
}

async function buildServer(): Promise<string> {
  if (run('go', ['version']) === undefined) {
    throw new DevDbError(`devdb: no toxiproxy-server found and Go is not installed to build it. ${HOW_TO_AVOID}`)
  }
  process.stderr.write(`devdb: building toxiproxy-server ${VERSION} with Go into ${CACHED_BIN} (once; ~30-60 s)\n`)
  await mkdir(path.dirname(CACHED_BIN), { recursive: true })
  // Build next to the cache entry so the final rename is atomic and parallel builds cannot clash.
  const gobin = await mkdtemp(`${CACHED_BIN}.build-`)
  try {
    await promisify(execFile)(
      'go',
      [
        'install',
        `-ldflags=-s -w -X github.com/Shopify/toxiproxy/v2.Version=${VERSION}`,
        `github.com/Shopify/toxiproxy/v2/cmd/server@v${VERSION}`,
      ],
      { env: { ...process.env, GOBIN: gobin, CGO_ENABLED: '0' }, timeout: 10 * 60_000, maxBuffer: 16 << 20 },
    )
    await rename(path.join(gobin, 'server'), CACHED_BIN)
    return CACHED_BIN
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr?.trim() ?? (error as Error).message
    throw new DevDbError(`devdb: building toxiproxy-server with Go failed:\n${stderr}\n${HOW_TO_AVOID}`, { cause: error })
  } finally {
    await rm(gobin, { recursive: true, force: true })
  }
}

/** Polls the API. A failed listen does not end the process, it only logs; so watch for that too. */
async function waitUntilReady(apiUrl: string, child: ChildProcess, output: () => string, spawnError: () => Error | undefined): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS
  while (Date.now() < deadline) {
    const error = spawnError()
    if (error) throw new Error(`it could not be run: ${(error as NodeJS.ErrnoException).code ?? error.message}`)
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`it exited (${child.exitCode ?? child.signalCode})`)
    if (output().includes('Server finished with error')) throw new Error('its API could not listen')
    try {
      if ((await fetch(`${apiUrl}/version`, { signal: AbortSignal.timeout(1_000) })).ok) return
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error(`its API did not answer within ${READY_TIMEOUT_MS / 1000} s`)
}

/** SIGKILL: toxiproxy keeps nothing worth a graceful shutdown, which can take seconds. */
async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.ref() // or an otherwise idle process would exit before the 'exit' event arrives
  child.kill('SIGKILL')
  await exited
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** Runs a short command; its stdout, or undefined when it cannot run or fails. */
function run(command: string, args: string[]): string | undefined {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 })
  } catch {
    return undefined
  }
}
