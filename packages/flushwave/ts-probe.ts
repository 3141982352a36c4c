import { startDatabase } from 'devdb'
import postgres from 'postgres'
const db = await startDatabase()
const sql = postgres(db.url, { max: 1, onnotice: () => {} })
const n = 62_000
const now = Date.now()
const dates = Array.from({ length: n }, (_, i) => new Date(now + i))
const iso = '{' + dates.map((d) => '"' + d.toISOString() + '"').join(',') + '}'
const pgText = '{' + dates.map((d) => '"' + d.toISOString().replace('T', ' ').replace('Z', '+00') + '"').join(',') + '}'
const epochMs = '{' + dates.map((d) => String(d.getTime())).join(',') + '}'
const variants: [string, string, string][] = [
  ['timestamptz[] ISO text', `select count(*) from unnest($1::timestamptz[]) as x`, iso],
  ['timestamptz[] pg text', `select count(*) from unnest($1::timestamptz[]) as x`, pgText],
  ['int8[] epoch ms -> to_timestamp', `select count(*) from (select to_timestamp(x / 1000.0) from unnest($1::int8[]) as x) s`, epochMs],
  ['int8[] epoch ms -> epoch + interval', `select count(*) from (select timestamptz 'epoch' + x * interval '1 millisecond' from unnest($1::int8[]) as x) s`, epochMs],
  ['int8[] s + ms intervals', `select count(*) from (select timestamptz 'epoch' + (x / 1000) * interval '1 second' + (x % 1000) * interval '1 millisecond' from unnest($1::int8[]) as x) s`, epochMs],
  ['text[] only (baseline)', `select count(*) from unnest($1::text[]) as x`, iso],
]
// Exact for the whole range a Date column accepts (years 1 to 9999), and for random times.
const probes = [Date.UTC(1, 0, 1) - 62135596800000 * 0, -62135596800000, 253402300799999, 0, -1, 1, ...Array.from({ length: 2000 }, () => Math.floor(Math.random() * 316e12) - 62135596800000)]
const lit = '{' + probes.join(',') + '}'
const rows = await sql.unsafe(`select to_json(timestamptz 'epoch' + (x / 1000) * interval '1 second' + (x % 1000) * interval '1 millisecond') #>> '{}' as t from unnest($1::int8[]) with ordinality as u(x, i) order by i`, [lit])
let bad = 0
rows.forEach((r, i) => { if (new Date(r.t as string).getTime() !== probes[i]) { bad++; console.log(probes[i], r.t) } })
console.log('inexact:', bad, 'of', probes.length)
await sql.unsafe(`set timezone = 'UTC'`)
for (let round = 0; round < 3; round++) {
  for (const [name, text, param] of variants) {
    const t0 = performance.now()
    for (let i = 0; i < 5; i++) await sql.unsafe(text, [param])
    console.log(round, name.padEnd(40), ((performance.now() - t0) / 5).toFixed(1), 'ms')
  }
}
await sql.end(); await db.stop()
