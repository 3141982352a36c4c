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

  const readOnly = async (on: boolean) => {
    await admin.unsafe(on ? `alter role ${role} set default_transaction_read_only = on` : `alter role ${role} reset default_transaction_read_only`)
    // Its sessions end, as a proxy ends them when their node is marked down; new ones take the setting.
    await admin`select pg_terminate_backend(pid) from pg_stat_activity where usename = ${role}`
  }
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
    opened = openExecutor(name, url.toString(), schema, { max: 1, searchPath: ns.name, connectTimeout: 2 })
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

  it('a flush refused as read only is a retryable ReadOnlyTransactionError, and nothing is committed', async () => {
    await readOnly(true)
    try {
      let error: unknown
      // The first query after its backend ended may fail as a lost connection (retryable too): then once more.
      for (let attempt = 0; attempt < 3 && !(error instanceof ReadOnlyTransactionError); attempt++) {
        const em = orm.em()
        em.create('Note', { body: 'refused' })
        error = await em.flush().catch((e: unknown) => e)
      }
      expect(error).toBeInstanceOf(ReadOnlyTransactionError)
      expect((error as ReadOnlyTransactionError).code).toBe('25006')
      expect(isRetryable(error)).toBe(true)
      expect(await rows('refused')).toBe(0)
    } finally {
      await readOnly(false)
    }
  })

  it('orm.unitOfWork retries a flush refused as read only onto a writable server, writing it once', async () => {
    await readOnly(true)
    const errors: string[] = []
    let healing: Promise<void> | undefined
    const result = await orm.unitOfWork(
      async (em) => {
        em.create('Note', { body: 'retried' })
      },
      {
        attempts: 6,
        backoffMs: () => 200,
        retryOn: (error) => {
          errors.push((error as Error).name)
          // The failover is over after the first refusal: the next attempts reach a writable server.
          if (error instanceof ReadOnlyTransactionError) healing ??= readOnly(false)
          return isRetryable(error)
        },
      },
    )
    await healing
    expect(errors).toContain('ReadOnlyTransactionError')
    expect(result.attempts).toBe(errors.length + 1)
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
