import { readFileSync } from 'node:fs'
import postgres from 'postgres'
import { afterAll, beforeAll, expect, inject, it, vi } from 'vitest'
import { createTablesSql } from 'flushwave'
import type {} from 'devdb/vitest' // types inject('databaseUrl')
import { features, shop } from '../src/features.js'

/** docs/guide/tour.md shows src/features.ts word for word, and it runs against PostgreSQL. */
const url = new URL(inject('databaseUrl'))
const database = `quickstart_features_${process.pid}`
const admin = postgres(url.href, { max: 1, onnotice: () => {} })
const own = new URL(url.href)
own.pathname = `/${database}`

beforeAll(async () => {
  await admin.unsafe(`drop database if exists ${database}`)
  await admin.unsafe(`create database ${database}`)
  const sql = postgres(own.href, { max: 1, onnotice: () => {} })
  for (const statement of createTablesSql(shop)) await sql.unsafe(statement)
  await sql.end()
})
afterAll(async () => {
  await admin.unsafe(`drop database if exists ${database} with (force)`)
  await admin.end()
})

it("is the code block of docs/guide/tour.md, word for word", () => {
  const page = readFileSync(new URL('../../../docs/guide/tour.md', import.meta.url), 'utf8')
  const code = readFileSync(new URL('../src/features.ts', import.meta.url), 'utf8')
  const tour = code.slice(code.indexOf('// ── schema'))
  expect(page).toContain('```ts\n' + tour + '```')
})

it('runs: every section does what its comment says', async () => {
  const log = vi.spyOn(console, 'log').mockImplementation(() => undefined)
  try {
    await features(own.href)
    const lines = log.mock.calls.map((args) => args.map(String).join(' '))
    expect(lines).toContain('credit now 25') // bob starts at 0
    expect(lines).toContain('committed after 1 attempt(s)')
    expect(lines).toContain('customers: 1 on this page: 1 more: false')
    expect(lines).toContain('credit in all: 30 of 1 customer(s)')
    expect(lines).toContain('rich: bob@example.com')
    expect(lines.filter((l) => l.startsWith('flushed '))).not.toHaveLength(0)
  } finally {
    log.mockRestore()
  }
  const sql = postgres(own.href, { max: 1, onnotice: () => {} })
  try {
    expect(await sql`select email, credit, version from customer`).toEqual([{ email: 'bob@example.com', credit: 30, version: 3 }])
  } finally {
    await sql.end()
  }
})
