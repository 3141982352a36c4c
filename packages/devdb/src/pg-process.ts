import { spawn, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import { DevDbError } from './errors.js'
import type { PgBinaries } from './pg-binaries.js'

const READY = 'database system is ready to accept connections'

// Messages in English, since readiness is read from the log.
const env = () => ({ ...process.env, LC_MESSAGES: 'C' })

/** Runs initdb to its end; a DevDbError when it cannot start or fails. */
export function initdb(bins: PgBinaries, args: string[], onLog: (text: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(bins.initdb, args, { ...bins.runAs, env: env(), stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout.on('data', (chunk: Buffer) => onLog(chunk.toString('utf8')))
    child.stderr.on('data', (chunk: Buffer) => onLog(chunk.toString('utf8')))
    // A failed spawn emits 'error', then 'close': the first settles.
    child.once('error', (error) => reject(spawnError(bins, bins.initdb, error)))
    child.once('close', (code, signal) =>
      code === 0 ? resolve() : reject(new DevDbError(`devdb: initdb failed (${signal ?? `exit code ${code}`})`)),
    )
  })
}

/**
 * Spawns the postmaster; `ready` resolves when it accepts connections and rejects (DevDbError) if
 * it cannot start or exits first. Its output keeps flowing to onLog, or it would block on a full pipe.
 */
export function postmaster(bins: PgBinaries, args: string[], onLog: (text: string) => void): { child: ChildProcess; ready: Promise<void> } {
  const child = spawn(bins.postgres, args, { ...bins.runAs, env: env(), stdio: ['ignore', 'pipe', 'pipe'] })
  const ready = new Promise<void>((resolve, reject) => {
    let tail = '' // the line may arrive split in two chunks
    const onData = (chunk: Buffer) => {
      const text = chunk.toString('utf8')
      onLog(text)
      tail = (tail + text).slice(-2 * READY.length)
      if (tail.includes(READY)) resolve()
    }
    child.stdout?.on('data', onData)
    child.stderr?.on('data', onData)
    child.on('error', (error) => reject(spawnError(bins, bins.postgres, error)))
    child.once('close', (code, signal) => reject(new DevDbError(`devdb: postgres exited (${signal ?? `exit code ${code}`}) before it was ready`)))
  })
  return { child, ready }
}

/** What a failed spawn means here, and the way out. */
function spawnError(bins: PgBinaries, binary: string, error: NodeJS.ErrnoException): DevDbError {
  const as = bins.runAs ? ' as the `postgres` user' : ''
  const fix =
    error.code === 'ENOENT'
      ? 'It is missing: reinstall (`pnpm install`).'
      : error.code === 'EACCES' && bins.runAs
        ? `That user must be able to enter every directory above ${path.dirname(binary)} and run the file.`
        : error.code === 'EACCES'
          ? `Make it executable (chmod +x ${binary}) or reinstall (\`pnpm install\`).`
          : ''
  return new DevDbError(`devdb: could not run ${binary}${as}: ${error.code ?? error.message}. ${fix}`, { cause: error })
}
