import { spawn, execFileSync } from 'node:child_process'
import { chmod, chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import type { Database } from 'devdb'
import { freePort } from 'devdb'

/** A PgBouncer in transaction mode in front of a database (as scripts/pgbouncer.sh starts it for CI). */
export interface Pooler {
  readonly host: string
  readonly port: number
  readonly version: string
  stop(): Promise<void>
}

/** The pgbouncer binary on PATH, or undefined. */
export function pgbouncerBinary(): string | undefined {
  return (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter(Boolean)
    .map((dir) => path.join(dir, 'pgbouncer'))
    .find((file) => {
      try {
        execFileSync(file, ['--version'], { stdio: 'ignore' })
        return true
      } catch {
        return false
      }
    })
}

export async function startPgBouncer(bin: string, db: Database, poolSize: number): Promise<Pooler> {
  const version = execFileSync(bin, ['--version'], { encoding: 'utf8' }).split('\n')[0]!.trim()
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-pgbouncer-'))
  await chmod(dir, 0o755)
  const port = await freePort()
  // Clients authenticate with trust; PgBouncer logs in to PostgreSQL with the password from auth_file.
  await writeFile(path.join(dir, 'users.txt'), `"${db.user}" "${db.password}"\n`)
  await writeFile(
    path.join(dir, 'pgbouncer.ini'),
    `[databases]
* = host=${db.host} port=${db.port}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
auth_type = trust
auth_file = ${dir}/users.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = ${poolSize}
ignore_startup_parameters = extra_float_digits,search_path,options
logfile = ${dir}/pgbouncer.log
pidfile = ${dir}/pgbouncer.pid
`,
  )
  // PgBouncer refuses to run as root: there it runs as `postgres`, as in scripts/pgbouncer.sh.
  const root = process.getuid?.() === 0
  if (root) {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim())
    for (const f of ['', 'users.txt', 'pgbouncer.ini']) await chown(path.join(dir, f), id('-u'), id('-g'))
  }
  const [cmd, args] = root ? ['runuser', ['-u', 'postgres', '--', bin, path.join(dir, 'pgbouncer.ini')]] : [bin, [path.join(dir, 'pgbouncer.ini')]]
  const child = spawn(cmd, args as string[], { stdio: 'ignore' })
  await waitForPort(port)
  return {
    host: '127.0.0.1',
    port,
    version,
    async stop() {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      // runuser may not pass the signal on: stop PgBouncer itself by the pid it wrote.
      const pid = Number(await readFile(path.join(dir, 'pgbouncer.pid'), 'utf8').catch(() => ''))
      if (pid > 0) process.kill(pid, 'SIGTERM')
      else child.kill('SIGTERM')
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 2_000))])
      await rm(dir, { recursive: true, force: true })
    },
  }
}

async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1')
      s.once('connect', () => (s.destroy(), resolve(true))).once('error', () => resolve(false))
    })
    if (ok) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`PgBouncer did not listen on 127.0.0.1:${port} within 5 s`)
}
