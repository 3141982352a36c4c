import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import { createSql } from './schema.js'

/** A fresh database with the benchmark tables, and an admin connection straight to it. */
export async function benchDatabase(serverUrl: string): Promise<{ url: string; name: string; admin: postgres.Sql; drop(): Promise<void> }> {
  const name = `bench_${process.pid}_${randomBytes(3).toString('hex')}`
  const server = postgres(serverUrl, { max: 1, onnotice: () => {} })
  await server.unsafe(`create database ${name}`)
  const url = new URL(serverUrl)
  url.pathname = `/${name}`
  const admin = postgres(url.toString(), { max: 1, onnotice: () => {} })
  for (const statement of createSql()) await admin.unsafe(statement)
  return {
    url: url.toString(),
    name,
    admin,
    drop: async () => {
      await admin.end()
      await server.unsafe(`drop database if exists ${name} with (force)`)
      await server.end()
    },
  }
}

/**
 * Turns the tables' identity sequences into pooled ones (an increment of 1000): every nextval then
 * reserves a block, and Flushwave's id pool refills with one statement per table.
 */
export async function poolSequences(admin: postgres.Sql): Promise<void> {
  for (const table of ['author', 'book', 'book_review', 'tag']) await admin.unsafe(`alter table ${table} alter column id set increment by 1000`)
}

/** The same URL pointing at another host and port (the latency proxy), keeping credentials and database. */
export function via(url: string, host: string, port: number): string {
  const u = new URL(url)
  u.hostname = host
  u.port = String(port)
  return u.toString()
}
