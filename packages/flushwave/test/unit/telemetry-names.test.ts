import { describe, expect, it } from 'vitest'
import { summarize } from '../../src/telemetry/summary.js'
import { targetOf } from '../../src/telemetry/target.js'

describe('span names and db.collection.name from a statement', () => {
  it.each([
    ['select t."id" from "book" as t where t."id" = any($1::int8[])', 'SELECT', 'book', 'SELECT book'],
    ['select count(*) from "shop"."order" as t', 'SELECT', 'shop.order', 'SELECT shop.order'],
    ['select 1 from "we""ird" t', 'SELECT', 'we"ird', 'SELECT we"ird'],
    ['  -- a comment\n /* another */ SELECT * FROM Book', 'SELECT', 'book', 'SELECT book'],
    ['with x as (select 1) select * from x', 'WITH', 'x', 'WITH x'],
    ['insert into "author" ("name") values ($1)', 'INSERT', 'author', 'INSERT author'],
    ['update "author" set "name" = $1', 'UPDATE', 'author', 'UPDATE author'],
    ['select nextval($1::regclass)', 'SELECT', undefined, 'SELECT'],
    ['select floor(extract(epoch from t."created_at") * 1000) from "author" as t', 'SELECT', 'author', 'SELECT author'],
    ['select * from (select 1 from "inner") as x', 'SELECT', undefined, 'SELECT'],
    ['', undefined, undefined, 'postgresql'],
  ])('%j', (text, operation, collection, name) => {
    expect(summarize(text)).toEqual({ operation, collection, name })
  })
})

describe('the server a driver connects to, from its options', () => {
  it('postgres.js: a function whose options hold arrays of hosts and ports', () => {
    const sql = Object.assign(() => undefined, { options: { host: ['db.internal'], port: [6432], database: 'shop' } })
    expect(targetOf(sql)).toEqual({ database: 'shop', host: 'db.internal', port: 6432 })
  })
  it('pg.Pool: a connection string, or fields', () => {
    expect(targetOf({ options: { connectionString: 'postgres://u:p@127.0.0.1:5433/my%20db' } })).toEqual({ database: 'my db', host: '127.0.0.1', port: 5433 })
    expect(targetOf({ options: { host: 'h', port: '5432', database: 'd' } })).toEqual({ database: 'd', host: 'h', port: 5432 })
  })
  it('knex: client.config.connection as a string or an object', () => {
    expect(targetOf({ client: { config: { connection: 'postgres://h:5439/k' } } })).toEqual({ database: 'k', host: 'h', port: 5439 })
    expect(targetOf({ client: { config: { connection: { connectionString: 'postgres://h2/k2' } } } })).toEqual({ database: 'k2', host: 'h2', port: undefined })
  })
  it('anything else: nothing', () => {
    expect(targetOf(undefined)).toEqual({})
    expect(targetOf({ client: {} })).toEqual({})
  })
})
