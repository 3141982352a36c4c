/**
 * What the server spends on bulkCreate's rows by each way of sending them, written by hand so that
 * only the insert shape differs: `unnest` (Flushwave's statements: arrays, timestamps as epoch
 * milliseconds), COPY in text format and COPY in binary format (timestamps as microseconds since
 * 2000). Ids are fetched untimed; every way writes the same five tables with both timestamps, in one
 * transaction on postgres.js (COPY through `.writable()`), in rotating order. Then one EXPLAIN
 * ANALYZE of the unnest statements says how much of the server's time the foreign-key triggers take:
 * no insert shape can save that part.
 *
 *   pnpm --filter bench exec tsx src/copy-formats.ts [authors=100] [rounds=11]
 */
import { startDatabase } from 'devdb'
import { tcpNoDelay } from 'flushwave'
import postgres from 'postgres'
import { graph, type Graph } from './data.js'
import { benchDatabase, poolSequences } from './database.js'

const [authors = '100', rounds = '11'] = process.argv.slice(2)
const db = await startDatabase()
const bench = await benchDatabase(db.url)
await poolSequences(bench.admin)
const sql = postgres(bench.url, { ...tcpNoDelay, max: 1, onnotice: () => {} })

type Kind = 'int8' | 'int4' | 'text' | 'timestamptz'
interface Table {
  name: string
  columns: readonly (readonly [string, Kind])[]
  rows: readonly (readonly (string | number)[])[]
}

/** The graph's rows per table, ids filled in; timestamps as epoch milliseconds. */
async function tables(g: Graph): Promise<Table[]> {
  const ids = async (table: string, n: number) =>
    (await sql`select nextval(pg_get_serial_sequence(${table}, 'id'))::text as id from generate_series(1, ${n}::int)`).map((r) => r.id as string)
  const [a, b, r, t] = await Promise.all([ids('author', g.authors.length), ids('book', g.books.length), ids('book_review', g.reviews.length), ids('tag', g.tags.length)])
  const now = Date.now()
  const times: [string, Kind][] = [['created_at', 'timestamptz'], ['updated_at', 'timestamptz']]
  return [
    { name: 'author', columns: [['id', 'int8'], ['first_name', 'text'], ['last_name', 'text'], ['email', 'text'], ...times], rows: g.authors.map((x, i) => [a[i]!, x.firstName, x.lastName, x.email, now, now]) },
    { name: 'book', columns: [['id', 'int8'], ['title', 'text'], ['pages', 'int4'], ['author_id', 'int8'], ...times], rows: g.books.map((x, i) => [b[i]!, x.title, x.pages, a[x.author]!, now, now]) },
    { name: 'book_review', columns: [['id', 'int8'], ['rating', 'int4'], ['text', 'text'], ['book_id', 'int8'], ...times], rows: g.reviews.map((x, i) => [r[i]!, x.rating, x.text, b[x.book]!, now, now]) },
    { name: 'tag', columns: [['id', 'int8'], ['name', 'text'], ...times], rows: g.tags.map((x, i) => [t[i]!, x.name, now, now]) },
    { name: 'book_tag', columns: [['book_id', 'int8'], ['tag_id', 'int8']], rows: g.bookTags.map((x) => [b[x.book]!, t[x.tag]!]) },
  ]
}

/** Flushwave's insert shape: one array per column, times decoded from epoch milliseconds. */
function unnest(table: Table): [string, unknown[]] {
  const decode = (x: string) => `timestamptz 'epoch' + (${x} / 1000) * interval '1 second' + (${x} % 1000) * interval '1 millisecond'`
  const names = table.columns.map(([, kind], i) => (kind === 'timestamptz' ? decode(`c${i}`) : `c${i}`))
  const arrays = table.columns.map(([, kind], i) => `$${i + 1}::${kind === 'timestamptz' ? 'int8' : kind}[]`)
  const text = `insert into ${table.name} (${table.columns.map(([c]) => c).join(', ')}) select ${names.join(', ')} from unnest(${arrays.join(', ')}) as d(${table.columns.map((_, i) => `c${i}`).join(', ')})`
  return [text, table.columns.map((_, i) => table.rows.map((row) => String(row[i])))]
}

function copyText(table: Table): Buffer {
  let out = ''
  for (const row of table.rows) out += `${row.map((v, i) => (table.columns[i]![1] === 'timestamptz' ? new Date(v as number).toISOString() : String(v))).join('\t')}\n`
  return Buffer.from(out)
}

const SINCE_2000_MS = Date.UTC(2000, 0, 1)

function copyBinary(table: Table): Buffer {
  const texts = table.rows.map((row) => row.map((v, i) => (table.columns[i]![1] === 'text' ? Buffer.from(v as string) : undefined)))
  let size = 19 + 2
  for (const row of texts) for (const [i, [, kind]] of table.columns.entries()) size += kind === 'text' ? 4 + row[i]!.length : kind === 'int4' ? 8 : 12
  size += 2 * table.rows.length
  const out = Buffer.allocUnsafe(size)
  let o = out.write('PGCOPY\n\xff\r\n\0', 0, 'latin1')
  o = out.writeInt32BE(0, o) // flags
  o = out.writeInt32BE(0, o) // header extension
  table.rows.forEach((row, r) => {
    o = out.writeInt16BE(row.length, o)
    table.columns.forEach(([, kind], i) => {
      const v = row[i]!
      if (kind === 'text') (o = out.writeInt32BE(texts[r]![i]!.length, o)), (o += texts[r]![i]!.copy(out, o))
      else if (kind === 'int4') (o = out.writeInt32BE(4, o)), (o = out.writeInt32BE(v as number, o))
      else if (kind === 'int8') (o = out.writeInt32BE(8, o)), (o = out.writeBigInt64BE(BigInt(v), o))
      else (o = out.writeInt32BE(8, o)), (o = out.writeBigInt64BE(BigInt((v as number) - SINCE_2000_MS) * 1000n, o))
    })
  })
  out.writeInt16BE(-1, o)
  return out
}

async function copy(tx: postgres.TransactionSql, table: Table, format: 'text' | 'binary'): Promise<void> {
  const data = format === 'text' ? copyText(table) : copyBinary(table)
  const stream = await tx.unsafe(`copy ${table.name} (${table.columns.map(([c]) => c).join(', ')}) from stdin${format === 'binary' ? ' (format binary)' : ''}`).writable()
  await new Promise<void>((resolve, reject) => {
    stream.on('error', reject)
    stream.on('finish', resolve)
    stream.end(data)
  })
}

const WAYS: Record<string, (ts: Table[]) => Promise<unknown>> = {
  unnest: (ts) => sql.begin((tx) => ts.map((t) => tx.unsafe(...(unnest(t) as [string, never[]])))),
  'copy text': (ts) => sql.begin(async (tx) => { for (const t of ts) await copy(tx, t, 'text') }),
  'copy binary': (ts) => sql.begin(async (tx) => { for (const t of ts) await copy(tx, t, 'binary') }),
}

const samples = new Map<string, number[]>(Object.keys(WAYS).map((w) => [w, []]))
const names = Object.keys(WAYS)
for (let round = 0; round < Number(rounds); round++) {
  for (let k = 0; k < names.length; k++) {
    const way = names[(round + k) % names.length]!
    const ts = await tables(graph(Number(authors), `r${round}${k}`))
    const started = performance.now()
    await WAYS[way]!(ts)
    samples.get(way)!.push(performance.now() - started)
  }
}
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!
const base = samples.get('unnest')!
console.log(`bulkCreate ×${authors} rows by hand, ${rounds} rounds, PostgreSQL ${(await sql`show server_version`)[0]!.server_version}`)
console.log('| way | median ms | ÷ unnest (median of per-round ratios) |\n|---|---:|---:|')
for (const [way, xs] of samples) console.log(`| ${way} | ${median(xs).toFixed(1)} | ${median(xs.map((x, i) => x / base[i]!)).toFixed(2)} |`)

// Where the unnest statements' time goes on the server, rolled back.
const plans: string[] = []
const explained = await tables(graph(Number(authors), 'explain')) // before BEGIN: the pool has one connection
await sql
  .begin(async (tx) => {
    for (const t of explained) {
      const [text, params] = unnest(t)
      const plan = (await tx.unsafe(`explain (analyze, format json) ${text}`, params as never[]))[0]!['QUERY PLAN'][0]
      const fk = (plan.Triggers as { 'Trigger Name': string; Time: number }[]).reduce((sum, x) => sum + x.Time, 0)
      plans.push(`| ${t.name} | ${t.rows.length} | ${plan['Execution Time'].toFixed(1)} | ${fk.toFixed(1)} |`)
    }
    throw new Error('rollback')
  })
  .catch((e: Error) => {
    if (e.message !== 'rollback') throw e
  })
console.log('\n| table | rows | execution ms | of which foreign-key triggers ms |\n|---|---:|---:|---:|')
console.log(plans.join('\n'))
await sql.end()
await bench.drop()
await db.stop()
