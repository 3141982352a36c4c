import { createTestSchema, type TestSchema } from 'devdb'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { createTablesSql, defineSchema, entity, isRetryable, ReadOnlyTransactionError, t, type Flushwave } from '../../src/index.js'
import { EXECUTORS, openExecutor, type ExecutorName, type OpenedExecutor } from '../support/executors.js'

/**
 * A flush that reaches a server that is read only now, as a primary demoted in a failover is:
 * the server refuses its first write (25006) and the flush fails typed, retryable, with nothing
 * committed; `orm.unitOfWork` retries it once the connection reaches a writable server. The role
 * of the pool is made read only (`default_transaction_read_only`) and back, and its backends are
 * ended, as HAProxy ends the sessions of a node marked down. On every executor.
 */
const schema = defineSchema({ Note: entity('note', { id: t.id(), body: t.text() }) })

describe.each(EXECUTORS)('a read-only server on %s', (name: ExecutorName) => {
  const tag = `${name.replace(/[^a-z]/g, '')}_${process.pid}_${Date.now().toString(36)}`
  const role = `fw_ro_${tag}`
  let ns: TestSchema
  let admin: postgres.Sql
  let opened: OpenedExecutor<typeof schema.defs>
  let orm: Flushwave<typeof schema.defs>

  /** A pool of its own, opened after the role's setting changed: its sessions take it. */
  const fresh = () => openExecutor(name, roleUrl, schema, { max: 1, searchPath: ns.name, connectTimeout: 2 })
  let roleUrl: string
  const rows = async (body: string) => (await admin`select count(*)::int as n from ${admin(ns.name)}.note where body = ${body}`)[0]!.n as number

  beforeAll(async () => {
    ns = await createTestSchema(inject('databaseUrl'), `ro_${name.replace(/[^a-z]/g, '')}`)
    admin = postgres(inject('databaseUrl'), { max: 1, onnotice: () => {} })
    await admin.unsafe(`create role ${role} login password 'ro'`)
    await admin.unsafe(`set search_path to "${ns.name}"`)
    for (const statement of createTablesSql(schema)) await admin.unsafe(statement)
    await admin.unsafe(`grant usage on schema "${ns.name}" to ${role}`)
    await admin.unsafe(`grant all on all tables in schema "${ns.name}" to ${role}`)
    await admin.unsafe(`grant all on all sequences in schema "${ns.name}" to ${role}`)
    await admin.unsafe('reset search_path')
    const url = new URL(inject('databaseUrl'))
    url.username = role
    url.password = 'ro'
    roleUrl = url.toString()
    opened = fresh()
    orm = opened.orm
    await orm.warmUp()
  })
  afterAll(async () => {
    await opened?.close()
    await admin?.unsafe(`drop owned by ${role} cascade`).catch(() => undefined)
    await admin?.unsafe(`drop role if exists ${role}`).catch(() => undefined)
    await admin?.end({ timeout: 1 })
    await ns?.drop()
  })

  it('a flush on a session that cannot write is a retryable ReadOnlyTransactionError, and nothing is committed', async () => {
    await admin.unsafe(`alter role ${role} set default_transaction_read_only = on`)
    const readOnly = fresh()
    try {
      const em = readOnly.orm.em()
      em.create('Note', { body: 'refused' })
      const error = await em.flush().catch((e: unknown) => e)
      expect(error).toBeInstanceOf(ReadOnlyTransactionError)
      expect((error as ReadOnlyTransactionError).code).toBe('25006')
      expect(isRetryable(error)).toBe(true)
      expect(await rows('refused')).toBe(0)
    } finally {
      await readOnly.close()
      await admin.unsafe(`alter role ${role} reset default_transaction_read_only`)
    }
  })

  it('orm.unitOfWork retries a flush the server refused as read only, once the server writes again, writing it once', async () => {
    // The server's refusal as a demoted primary gives it (25006), from a trigger that the
    // "failover" then drops: the client sees what it would see, without ending any session.
    const table = `"${ns.name}".note`
    await admin.unsafe(`create function "${ns.name}".refuse() returns trigger language plpgsql as $$ begin raise exception 'cannot execute INSERT in a read-only transaction' using errcode = '25006'; end $$`)
    await admin.unsafe(`create trigger refuse before insert on ${table} for each row execute function "${ns.name}".refuse()`)
    const errors: string[] = []
    let healing: Promise<unknown> | undefined
    const result = await orm.unitOfWork(
      async (em) => {
        await healing // the failover is over before the next attempt runs
        em.create('Note', { body: 'retried' })
      },
      {
        attempts: 4,
        backoffMs: () => 50,
        retryOn: (error) => {
          errors.push((error as Error).name)
          if (error instanceof ReadOnlyTransactionError) healing ??= admin.unsafe(`drop trigger refuse on ${table}`)
          return isRetryable(error)
        },
      },
    )
    expect(errors).toEqual(['ReadOnlyTransactionError'])
    expect(result.attempts).toBe(2)
    expect(await rows('retried')).toBe(1)
  })

  it('a read-only transaction of the application still refuses a flush before sending, and that is not retryable', async () => {
    const em = orm.em()
    const error = await em
      .transaction(
        async () => {
          em.create('Note', { body: 'never' })
          await em.flush()
        },
        { readOnly: true },
      )
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ReadOnlyTransactionError)
    expect(isRetryable(error)).toBe(false)
  })
})
