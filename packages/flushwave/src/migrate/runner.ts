import type { Executor } from '../drivers/executor.js'
import { MigrationError } from '../errors.js'
import { quoteIdent } from '../schema/quote.js'
import { splitStatements, type Migration } from './files.js'

/**
 * Applies migrations and keeps their history in a table of its own. Each migration runs in a
 * transaction of its own, which first takes a transaction-scoped advisory lock (so every instance of
 * an application may run `up` at start-up: they take turns, and each finds what the others applied)
 * and then reads the history again under it: a migration is applied once, whoever gets there first.
 * `lock_timeout` bounds the wait of its statements for the tables they change (not the wait for the
 * advisory lock: an instance waits for another's migration as long as it runs). A failure rolls its
 * transaction back, history row included, and names the migration and statement.
 */
export interface MigrateOptions {
  /** The history table (default `flushwave_migrations`). */
  readonly table?: string
  /** How long a statement may wait for a lock on what it changes (default 10 000 ms). */
  readonly lockTimeoutMs?: number
  /** Told each migration as it is applied or undone. */
  readonly log?: (line: string) => void
}

export const DEFAULT_HISTORY_TABLE = 'flushwave_migrations'

/** A migration and where it stands. */
export interface MigrationStatus {
  readonly id: string
  /** `applied`, `pending`, `edited` (applied, but its files changed since) or `missing` (applied, its files gone). */
  readonly state: 'applied' | 'pending' | 'edited' | 'missing'
  readonly appliedAt?: Date
}

interface HistoryRow {
  readonly id: string
  readonly checksum: string
  readonly appliedAt: Date
}

/** Applies every migration not applied yet, oldest first; returns the ids it applied (not those another instance did). */
export async function migrateUp(executor: Executor, migrations: readonly Migration[], options: MigrateOptions = {}): Promise<string[]> {
  const table = quoteIdent(options.table ?? DEFAULT_HISTORY_TABLE)
  await ensureHistory(executor, table)
  refuseEdited(await history(executor, table), migrations)
  const applied: string[] = []
  for (const migration of migrations) {
    const ran = await executor.transaction(async (tx) => {
      await lock(tx, table, options)
      const [row] = await tx.read({ text: `select checksum from ${table} where id = $1`, params: [migration.id] })
      if (row !== undefined) {
        if (row[0] !== migration.checksum) throw edited([migration.id])
        return false
      }
      await run(tx, migration, 'up')
      await tx.read({ text: `insert into ${table} (id, checksum) values ($1, $2)`, params: [migration.id, migration.checksum] })
      return true
    })
    if (ran) {
      applied.push(migration.id)
      options.log?.(`applied ${migration.id}`)
    }
  }
  return applied
}

/** Undoes the last applied migration (by the time it was applied); undefined when none is. */
export async function migrateDown(executor: Executor, migrations: readonly Migration[], options: MigrateOptions = {}): Promise<string | undefined> {
  const table = quoteIdent(options.table ?? DEFAULT_HISTORY_TABLE)
  await ensureHistory(executor, table)
  const undone = await executor.transaction(async (tx) => {
    await lock(tx, table, options)
    const [row] = await tx.read({ text: `select id, checksum from ${table} order by applied_at desc, id desc limit 1`, params: [] })
    if (row === undefined) return undefined
    const id = String(row[0])
    const migration = migrations.find((m) => m.id === id)
    if (migration === undefined) throw new MigrationError(id, undefined, `migration ${id} is the last applied, but its files are not in the migrations directory: cannot undo it`)
    if (row[1] !== migration.checksum) throw edited([id])
    await run(tx, migration, 'down')
    await tx.read({ text: `delete from ${table} where id = $1`, params: [id] })
    return id
  })
  if (undone !== undefined) options.log?.(`undid ${undone}`)
  return undone
}

/**
 * Records a migration as applied without running it: the baseline of a database whose tables were
 * made otherwise (`flushwave migrate baseline`). Refused when the history holds any migration.
 */
export async function recordApplied(executor: Executor, migration: Migration, options: MigrateOptions = {}): Promise<void> {
  const table = quoteIdent(options.table ?? DEFAULT_HISTORY_TABLE)
  await ensureHistory(executor, table)
  await executor.transaction(async (tx) => {
    await lock(tx, table, options)
    const [row] = await tx.read({ text: `select id from ${table} limit 1`, params: [] })
    if (row !== undefined) throw new MigrationError(migration.id, undefined, `the database has applied migrations already (${String(row[0])}…): a baseline is the first migration of a database`)
    await tx.read({ text: `insert into ${table} (id, checksum) values ($1, $2)`, params: [migration.id, migration.checksum] })
  })
  options.log?.(`recorded ${migration.id} as applied`)
}

/** Every migration, on disk or in the history, and where it stands. */
export async function migrationStatus(executor: Executor, migrations: readonly Migration[], options: MigrateOptions = {}): Promise<MigrationStatus[]> {
  const table = quoteIdent(options.table ?? DEFAULT_HISTORY_TABLE)
  const [exists] = await executor.read({ text: 'select to_regclass($1) is not null', params: [table] })
  const rows = exists?.[0] === true || exists?.[0] === 't' ? await history(executor, table) : []
  const byId = new Map(rows.map((r) => [r.id, r]))
  const out: MigrationStatus[] = migrations.map((m) => {
    const row = byId.get(m.id)
    if (row === undefined) return { id: m.id, state: 'pending' }
    return { id: m.id, state: row.checksum === m.checksum ? 'applied' : 'edited', appliedAt: row.appliedAt }
  })
  const onDisk = new Set(migrations.map((m) => m.id))
  for (const row of rows) if (!onDisk.has(row.id)) out.push({ id: row.id, state: 'missing', appliedAt: row.appliedAt })
  return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

/** The history table, made under the lock (two instances starting at once would both try). */
async function ensureHistory(executor: Executor, table: string): Promise<void> {
  const [exists] = await executor.read({ text: 'select to_regclass($1) is not null', params: [table] })
  if (exists?.[0] === true || exists?.[0] === 't') return
  await executor.transaction(async (tx) => {
    await lock(tx, table, {})
    await tx.read({ text: `create table if not exists ${table} (id text primary key, checksum text not null, applied_at timestamptz not null default clock_timestamp())`, params: [] })
  })
}

async function lock(tx: Executor, table: string, options: MigrateOptions): Promise<void> {
  await tx.read({ text: "select pg_advisory_xact_lock(hashtext('flushwave migrations ' || $1))", params: [table] })
  await tx.read({ text: "select set_config('lock_timeout', $1, true)", params: [`${options.lockTimeoutMs ?? 10_000}ms`] })
}

async function history(executor: Executor, table: string): Promise<HistoryRow[]> {
  const rows = await executor.read({ text: `select id, checksum, applied_at from ${table} order by id`, params: [] })
  return rows.map((r) => ({ id: String(r[0]), checksum: String(r[1]), appliedAt: new Date(r[2] as string) }))
}

function refuseEdited(rows: readonly HistoryRow[], migrations: readonly Migration[]): void {
  const files = new Map(migrations.map((m) => [m.id, m.checksum]))
  const changed = rows.filter((r) => files.has(r.id) && files.get(r.id) !== r.checksum).map((r) => r.id)
  if (changed.length > 0) throw edited(changed)
}

function edited(ids: readonly string[]): MigrationError {
  return new MigrationError(ids[0]!, undefined, `applied migration${ids.length > 1 ? 's' : ''} ${ids.join(', ')} changed since ${ids.length > 1 ? 'they were' : 'it was'} applied (checksum differs): restore the applied files, and put new changes in a new migration`)
}

async function run(tx: Executor, migration: Migration, direction: 'up' | 'down'): Promise<void> {
  for (const statement of splitStatements(direction === 'up' ? migration.up : migration.down)) {
    try {
      await tx.read({ text: statement, params: [] })
    } catch (error) {
      const reason = (error as Error)?.message ?? String(error)
      throw new MigrationError(migration.id, statement, `migration ${migration.id} (${direction}.sql) failed, nothing of it applied: ${reason}\n  in: ${statement}`, { cause: error })
    }
  }
}
