/**
 * `orm.migrate()` on every executor: the fourteen generated migrations of
 * test/support/schema-versions.ts applied through postgres.js, node-postgres, knex and PGlite, each
 * in its own transaction with its advisory lock and history, leave checkSchema() empty for the last
 * version; a second call applies nothing.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineSchema, flushwave } from '../../src/index.js'
import { migrateMain } from '../../src/migrate/command.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'
import { billing, versions } from '../support/schema-versions.js'

const support = fileURLToPath(new URL('../support/schema-versions.ts', import.meta.url))
let dir: string

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'flushwave-migrate-executors-'))
  for (const [i, version] of versions.entries()) {
    const module = join(dir, `v${i + 1}.ts`)
    await writeFile(module, `import { versions } from ${JSON.stringify(support)}\nexport const schema = versions[${i}]!.schema\n`)
    expect(await migrateMain(['generate', `v${i + 1}`, '--module', module, '--dir', join(dir, 'migrations'), '--offline', '--allow-destructive', ...(version.flags ?? [])])).toBe(0)
  }
})
afterAll(() => rm(dir, { recursive: true, force: true }))

describe.each(ALL_EXECUTORS)('orm.migrate() through %s', (executor) => {
  let db: TestDatabase<Record<string, never>>
  beforeAll(async () => {
    db = await testDatabase(defineSchema({}), { name: 'migrate_executors', executor })
    // The migrations make the ledger and the extra PostgreSQL schema themselves.
    await db.sql.unsafe('drop table if exists flushwave_outcome')
    await db.sql.unsafe(`drop schema if exists "${billing}" cascade`)
  })
  afterAll(async () => {
    await db?.sql.unsafe(`drop schema if exists "${billing}" cascade`)
    await db?.close()
  })

  it('applies every migration once, and then none', async () => {
    const applied = await db.orm.migrate({ dir: join(dir, 'migrations') })
    expect(applied.map((id) => id.slice(15))).toEqual(versions.map((_, i) => `v${i + 1}`))
    expect(await flushwave({ schema: versions.at(-1)!.schema, executor: db.orm.executor }).checkSchema()).toEqual([])
    expect(await db.orm.migrate({ dir: join(dir, 'migrations') })).toEqual([])
  })
})
