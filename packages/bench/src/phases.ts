/**
 * Where a Flushwave flush spends its time (`--profile`): entity creation timed by the harness, then
 * the flush's own phases from FlushResult.phases (checks, ids, changes, plan, render, write, record;
 * they sum to durationMs). postgres.js executor, at 0 ms latency, one ORM instance kept warm.
 */
import { flushwave, tcpNoDelay, type FlushPhases, type FlushResult } from 'flushwave'
import postgres from 'postgres'
import { graph } from './data.js'
import { fullGc } from './gc.js'
import { emptyTables } from './empty-tables.js'
import { emptyAll, insertIds } from './scenarios.js'
import { mixedTable } from './schema.js'
import { benchSchema, createGraph, mixedName } from './series/flushwave.js'
import { median } from './stats.js'

export type Phase = 'create' | keyof FlushPhases
export const PHASES: readonly Phase[] = ['create', 'checks', 'ids', 'changes', 'plan', 'render', 'write', 'record']

export interface PhaseRow {
  readonly unit: string
  readonly samples: number
  /** Median ms per phase, and of create + flush. */
  readonly medians: Readonly<Record<Phase, number>>
  readonly totalMs: number
}

interface Sample {
  readonly createMs: number
  readonly result: FlushResult
}

export async function measurePhases(url: string, admin: postgres.Sql, samples: (size: number) => number): Promise<PhaseRow[]> {
  const sql = postgres(url, { ...tcpNoDelay, max: 1, onnotice: () => {} })
  await sql`select 1`
  const orm = flushwave({ schema: benchSchema, sql })
  const units: [string, number, () => Promise<Sample>][] = [
    ['bulkCreate ×1', 1, () => bulkCreate(admin, orm, 1)],
    ['bulkCreate ×100', 100, () => bulkCreate(admin, orm, 100)],
    ['mixedFlush ×10', 10, () => mixedFlush(admin, orm, 10)],
    ['cpuFlush ×10000', 10_000, () => cpuFlush(admin, orm, 10_000)],
  ]
  const out: PhaseRow[] = []
  try {
    for (const [unit, size, once] of units) {
      await once() // warm: statement shapes, JIT, the id pool
      const got: Sample[] = []
      for (let i = 0; i < samples(size); i++) got.push(await once())
      const of = (phase: Phase) => median(got.map((s) => (phase === 'create' ? s.createMs : s.result.phases[phase])))
      const medians = Object.fromEntries(PHASES.map((p) => [p, of(p)])) as Record<Phase, number>
      out.push({ unit, samples: got.length, medians, totalMs: median(got.map((s) => s.createMs + s.result.durationMs)) })
    }
  } finally {
    await sql.end()
  }
  return out
}

type Orm = ReturnType<typeof flushwave<typeof benchSchema.defs>>

let markers = 0
async function bulkCreate(admin: postgres.Sql, orm: Orm, size: number): Promise<Sample> {
  await emptyAll(admin)
  const g = graph(size, `phases${++markers}`)
  const m = orm.em()
  await fullGc()
  const started = performance.now()
  createGraph(m, g)
  const createMs = performance.now() - started
  return { createMs, result: await m.flush() }
}

/** As the mixedFlush cell: per table, one row created, one loaded row updated and one removed. */
async function mixedFlush(admin: postgres.Sql, orm: Orm, size: number): Promise<Sample> {
  const tables = Array.from({ length: size }, (_, i) => mixedTable(i + 1))
  await emptyTables(admin, tables)
  const marker = `phases${++markers}`
  const seeded = await Promise.all(tables.map((table) => insertIds(admin, table, 2, marker)))
  const m = orm.em()
  const loaded = await Promise.all(tables.map((table, i) => m.find(mixedName(table), { id: { in: seeded[i]! } })))
  await fullGc()
  const started = performance.now()
  tables.forEach((table, i) => {
    m.create(mixedName(table), { name: marker, value: 1 })
    for (const row of loaded[i]!) {
      if (row.id === seeded[i]![0]) row.value = 42
      else m.remove(row)
    }
  })
  const createMs = performance.now() - started
  return { createMs, result: await m.flush() }
}

async function cpuFlush(admin: postgres.Sql, orm: Orm, size: number): Promise<Sample> {
  const table = mixedTable(2)
  await emptyTables(admin, [table])
  const ids = await insertIds(admin, table, size, `phases${++markers}`)
  const m = orm.em()
  const rows = await m.find(mixedName(table), { id: { in: ids } })
  await fullGc()
  const started = performance.now()
  for (const row of rows) row.value = row.value + 1
  const createMs = performance.now() - started
  return { createMs, result: await m.flush() }
}

export function phaseTable(rows: readonly PhaseRow[]): string {
  const lines = [
    `| unit of work | n | ${PHASES.join(' | ')} | total |`,
    `|---|---:|${PHASES.map(() => '---:').join('|')}|---:|`,
  ]
  for (const r of rows) lines.push(`| ${r.unit} | ${r.samples} | ${PHASES.map((p) => fmt(r.medians[p])).join(' | ')} | ${fmt(r.totalMs)} |`)
  return lines.join('\n')
}

const fmt = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2))
