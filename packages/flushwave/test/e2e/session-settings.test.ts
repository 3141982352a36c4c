import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import {
  createTablesSql,
  defineSchema,
  entity,
  FlushError,
  flushwave,
  FlushwaveError,
  PermissionError,
  ReadOnlyTransactionError,
  SerializationError,
  t,
  type Flushwave,
  type QueryEvent,
} from '../../src/index.js'
import { openPGlite } from '../support/pglite.js'
import { EXECUTORS, openExecutor, type ExecutorName, type OpenedExecutor } from '../support/executors.js'

/**
 * An EntityManager's settings (`orm.em({ settings, role })`) and a transaction's options
 * (`em.transaction(fn, { isolation, readOnly, statementTimeoutMs, settings })`), applied right after
 * BEGIN in the same pipeline: row-level security per tenant over one pool, 1 round trip per flush,
 * nothing left on a connection for the next client; serializable write skew retried; a read-only
 * transaction refusing a flush before anything is sent. On every executor, and with PGBOUNCER_URL
 * (scripts/pgbouncer.sh) through PgBouncer in transaction mode, where a session setting would leak
 * from one client to the next.
 */
const schema = defineSchema({
  Note: entity('note', { id: t.id(), tenant: t.text(), body: t.text() }),
  Doctor: entity('doctor', { id: t.id(), name: t.text(), onCall: t.boolean() }),
})
type Orm = Flushwave<typeof schema.defs>
const bouncer = process.env.PGBOUNCER_URL
const TENANTS = ['acme', 'globex'] as const

describe.each(EXECUTORS)(`transaction settings on %s${bouncer ? ' through PgBouncer' : ''}`, (name: ExecutorName) => {
  const tag = `${name.replace(/[^a-z]/g, '')}_${process.pid}_${Date.now().toString(36)}`
  const database = `sess_${tag}`
  const role = `fw_tenant_${tag}`
  const direct = () => inject('databaseUrl')
  let server: postgres.Sql
  let admin: postgres.Sql
  let opened: OpenedExecutor<typeof schema.defs>
  let orm: Orm
  const events: QueryEvent[] = []

  beforeAll(async () => {
    server = postgres(direct(), { max: 1, onnotice: () => {} })
    await server.unsafe(`create database ${database}`)
    await server.unsafe(`create role ${role} nologin`)
    const at = new URL(direct())
    at.pathname = `/${database}`
    admin = postgres(at.toString(), { max: 1, onnotice: () => {} })
    for (const statement of createTablesSql(schema)) await admin.unsafe(statement)
    // A pooled sequence, as production flushes run: ids come from the pool at create, its refill
    // rides after COMMIT, so no flush waits on an id fetch of its own.
    await admin.unsafe('alter table note alter column id set increment by 1000')
    await admin.unsafe(`grant usage on schema public to ${role}`)
    await admin.unsafe(`grant select, insert, update, delete on note, doctor to ${role}`)
    // Tenants see and write only their own notes; the connection's own (super)user is not subject to it.
    await admin.unsafe('alter table note enable row level security')
    await admin.unsafe(`create policy tenant_notes on note to ${role} using (tenant = current_setting('app.tenant', true)) with check (tenant = current_setting('app.tenant', true))`)
    const url = new URL(bouncer ?? direct())
    url.pathname = `/${database}`
    opened = openExecutor(name, url.toString(), schema, { max: 3, ...(bouncer && name === 'postgres.js' ? { prepare: false } : {}), orm: { onQuery: (e) => events.push(e) } })
    orm = opened.orm
    await orm.warmUp()
  }, 60_000)

  afterAll(async () => {
    await opened?.close()
    await admin?.end({ timeout: 1 })
    await server?.unsafe(`drop database if exists ${database} with (force)`)
    await server?.unsafe(`drop role if exists ${role}`)
    await server?.end({ timeout: 1 })
  })

  const tenantEm = (tenant: string) => orm.em({ settings: { 'app.tenant': tenant }, role })

  it('500 interleaved units of work of two tenants on one pool: none reads or writes the other\'s rows, every flush one round trip', { timeout: 120_000 }, async () => {
    const UNITS = 500
    const CONCURRENT = 8
    let next = 0
    const seen: Record<string, number> = { acme: 0, globex: 0 }
    const worker = async () => {
      for (let i = next++; i < UNITS; i = next++) {
        const tenant = TENANTS[i % 2]!
        const em = tenantEm(tenant)
        const [notes, count] = await Promise.all([em.find('Note', {}), em.count('Note', {})])
        for (const note of notes) expect(note.tenant).toBe(tenant)
        // Read committed: the count's snapshot may hold the flushes that committed after the find's.
        expect(count).toBeGreaterThanOrEqual(notes.length)
        seen[tenant] = Math.max(seen[tenant]!, notes.length)
        em.create('Note', { tenant, body: `${tenant} ${i}` })
        if (notes.length > 0) notes[i % notes.length]!.body = `${tenant} ${i}, edited`
        const result = await em.flush()
        expect(result.roundTrips).toBe(1)
      }
    }
    await Promise.all(Array.from({ length: CONCURRENT }, worker))
    const rows = await admin`select tenant, count(*)::int as n, count(*) filter (where body not like tenant || ' %')::int as foreign from note group by tenant order by tenant`
    expect(rows.map((r) => [r.tenant, r.n, r.foreign])).toEqual([
      ['acme', UNITS / 2, 0],
      ['globex', UNITS / 2, 0],
    ])
    // Each tenant read its own rows as they grew (up to the other workers' last flushes).
    expect(seen.acme).toBeGreaterThan(UNITS / 2 - CONCURRENT - 1)
    expect(seen.globex).toBeGreaterThan(UNITS / 2 - CONCURRENT - 1)
  })

  it('sends the settings in the flush\'s one pipeline, ahead of its statements, which are as without them', async () => {
    events.length = 0
    const em = tenantEm('acme')
    em.create('Note', { tenant: 'acme', body: 'acme pipeline' })
    const result = await em.flush()
    expect(result.roundTrips).toBe(1)
    const writes = events.filter((e) => e.phase === 'write')
    expect(writes[0]!.text).toMatch(/^insert into "note"/)
    // The settings statement itself is the protocol's, like BEGIN: read it back on the server.
    const [read] = await tenantEm('acme').query<{ tenant: string; role: string }>("select current_setting('app.tenant') as tenant, current_user as role")
    expect(read).toEqual({ tenant: 'acme', role })
  })

  it('a write across tenants is a PermissionError and commits nothing; a row of another tenant is not there to update', async () => {
    const em = tenantEm('acme')
    em.create('Note', { tenant: 'acme', body: 'acme not committed' })
    em.create('Note', { tenant: 'globex', body: 'acme writing as globex' })
    const error = await em.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(PermissionError)
    expect((error as PermissionError).code).toBe('42501')
    expect((error as Error).message).toMatch(/row-level security/)
    const [globexNote] = await admin`select id::int as id from note where tenant = 'globex' limit 1`
    const other = tenantEm('acme')
    other.ref('Note', globexNote!.id as number).body = 'acme editing globex'
    expect((await other.flush()).updated.note ?? 0).toBe(0)
    const [row] = await admin`select count(*)::int as n from note where body in ('acme not committed', 'acme writing as globex', 'acme editing globex')`
    expect(row!.n).toBe(0)
  })

  it('leaves nothing on the connections: a plain EntityManager sees no tenant and its own role', async () => {
    await Promise.all(TENANTS.map((tenant) => tenantEm(tenant).find('Note', {})))
    const plain = await Promise.all(Array.from({ length: 12 }, () => orm.em().query<{ tenant: string | null; role: string }>("select current_setting('app.tenant', true) as tenant, current_user as role")))
    for (const [row] of plain) {
      expect(row!.tenant ?? '').toBe('')
      expect(row!.role).not.toBe(role)
    }
    // And a plain EntityManager (not subject to the policy) sees every tenant's notes.
    expect(new Set((await orm.em().find('Note', {})).map((n) => n.tenant))).toEqual(new Set(TENANTS))
  })

  it('reads made together run in one transaction of their own: one pipeline', async () => {
    const em = tenantEm('globex')
    const xid = "select pg_current_xact_id()::text as xid, current_setting('app.tenant') as tenant"
    const [a, b, notes, c] = await Promise.all([em.query<{ xid: string; tenant: string }>(xid), em.query<{ xid: string; tenant: string }>(xid), em.find('Note', {}), em.query<{ xid: string; tenant: string }>(xid)])
    expect(new Set([a[0]!.xid, b[0]!.xid, c[0]!.xid]).size).toBe(1)
    expect(a[0]!.tenant).toBe('globex')
    expect(notes.every((n) => n.tenant === 'globex')).toBe(true)
    // A failing read fails alone; the reads behind it in the same pipeline are answered.
    const [bad, good] = await Promise.allSettled([em.query('select 1 / 0'), em.count('Note', {})])
    expect(bad.status).toBe('rejected')
    expect(good).toMatchObject({ status: 'fulfilled', value: notes.length })
  })

  it('em.transaction() and em.stream() apply the settings too; the transaction\'s own settings win', async () => {
    const em = tenantEm('acme')
    const inside = await em.transaction(async (tx) => {
      const [row] = await tx.query<{ tenant: string; timeout: string }>("select current_setting('app.tenant') as tenant, current_setting('statement_timeout') as timeout")
      const notes = await tx.find('Note', {})
      return { row, tenants: new Set(notes.map((n) => n.tenant)) }
    })
    expect(inside.row!.tenant).toBe('acme')
    expect(inside.tenants).toEqual(new Set(['acme']))
    const own = await em.transaction(async (tx) => (await tx.query<{ tenant: string; timeout: string }>("select current_setting('app.tenant') as tenant, current_setting('statement_timeout') as timeout"))[0], {
      settings: { 'app.tenant': 'globex' },
      statementTimeoutMs: 2500,
    })
    expect(own).toEqual({ tenant: 'globex', timeout: '2500ms' })
    const streamed: string[] = []
    for await (const note of tenantEm('globex').stream('Note', {}, { batchSize: 50 })) streamed.push(note.tenant)
    expect(streamed.length).toBeGreaterThan(0)
    expect(new Set(streamed)).toEqual(new Set(['globex']))
  })

  it('isolation and read only go in BEGIN; a read-only transaction refuses a flush before anything is sent', async () => {
    const em = orm.em()
    const modes = await em.transaction(async (tx) => (await tx.query<{ isolation: string; readOnly: string }>("select current_setting('transaction_isolation') as isolation, current_setting('transaction_read_only') as \"readOnly\""))[0], {
      isolation: 'repeatable read',
      readOnly: true,
    })
    expect(modes).toEqual({ isolation: 'repeatable read', readOnly: 'on' })
    events.length = 0
    const error = await em
      .transaction(
        async (tx) => {
          tx.create('Note', { tenant: 'acme', body: 'read only' })
          await tx.flush()
        },
        { readOnly: true },
      )
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ReadOnlyTransactionError)
    expect(events.filter((e) => e.phase !== 'read')).toEqual([])
    // The server holds it to it as well: a raw write fails there.
    await expect(em.transaction((tx) => tx.query("insert into note (tenant, body) values ('acme', 'raw')"), { readOnly: true })).rejects.toMatchObject({ code: '25006' })
  })

  it('serializable: a write-skew pair fails one side with a SerializationError, and unitOfWork retries it', { timeout: 60_000 }, async () => {
    await admin`delete from doctor`
    await admin`insert into doctor (name, on_call) values ('alice', true), ('bob', true)`
    // Both read that two are on call, then each takes one off: one of them must not commit.
    let arrived = 0
    let release!: () => void
    const bothRead = new Promise<void>((resolve) => (release = resolve))
    const attempts: Record<string, number> = {}
    const goOffCall = (who: string) =>
      orm.unitOfWork(
        async (em) => {
          attempts[who] = (attempts[who] ?? 0) + 1
          await em.transaction(
            async (tx) => {
              const onCall = await tx.find('Doctor', { onCall: true })
              if (attempts[who] === 1 && ++arrived === 2) release()
              if (attempts[who] === 1) await bothRead
              if (onCall.length < 2) return
              onCall.find((d) => d.name === who)!.onCall = false
              await tx.flush()
            },
            { isolation: 'serializable' },
          )
        },
        { attempts: 3 },
      )
    const results = await Promise.allSettled([goOffCall('alice'), goOffCall('bob')])
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled'])
    expect(Object.values(attempts).sort()).toEqual([1, 2])
    const [row] = await admin`select count(*)::int as n from doctor where on_call`
    expect(row!.n).toBe(1)
    // Without retries the loser's error is typed.
    await admin`update doctor set on_call = true`
    arrived = 0
    let bothAgain!: () => void
    const readAgain = new Promise<void>((resolve) => (bothAgain = resolve))
    const once = (who: string) =>
      orm.em().transaction(
        async (tx) => {
          const onCall = await tx.find('Doctor', { onCall: true })
          if (++arrived === 2) bothAgain()
          await readAgain
          onCall.find((d) => d.name === who)!.onCall = false
          await tx.flush()
        },
        { isolation: 'serializable' },
      )
    const pair = await Promise.allSettled([once('alice'), once('bob')])
    const failed = pair.filter((r): r is PromiseRejectedResult => r.status === 'rejected')
    expect(failed).toHaveLength(1)
    expect(failed[0]!.reason).toBeInstanceOf(SerializationError)
  })

  it('refuses bad options before anything is sent, and types what the server refuses', async () => {
    expect(() => orm.em({ settings: { 'app tenant': 'x' } })).toThrow(FlushwaveError)
    expect(() => orm.em({ settings: { role: 'x' } })).toThrow(/`role` option/)
    expect(() => orm.em({ statementTimeoutMs: -1 })).toThrow(FlushwaveError)
    await expect(orm.em().transaction(async () => 1, { isolation: 'snapshot' as never })).rejects.toBeInstanceOf(FlushwaveError)
    // A role that does not exist: the flush, the reads and the transaction fail typed, nothing committed.
    const ghost = () => orm.em({ role: `${role}_missing` })
    const em = ghost()
    em.create('Note', { tenant: 'acme', body: 'by a ghost' })
    const error = await em.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(FlushError)
    expect((error as Error).message).toMatch(/settings .* were refused: role .* does not exist/)
    await expect(ghost().find('Note', {})).rejects.toBeInstanceOf(FlushError)
    await expect(ghost().transaction(async (tx) => tx.find('Note', {}))).rejects.toBeInstanceOf(FlushError)
    const [row] = await admin`select count(*)::int as n from note where body = 'by a ghost'`
    expect(row!.n).toBe(0)
    // The pool is whole afterwards.
    await opened.whole()
  })
})

describe('transaction settings on PGlite', () => {
  it('applies the settings and the role to flushes, reads, transactions and streams; refuses a read-only flush', async () => {
    const db = await openPGlite()
    for (const statement of createTablesSql(schema)) await db.exec(statement)
    await db.exec(`create role pglite_tenant nologin;
      grant select, insert, update, delete on note to pglite_tenant;
      alter table note enable row level security;
      create policy tenant_notes on note to pglite_tenant using (tenant = current_setting('app.tenant', true)) with check (tenant = current_setting('app.tenant', true))`)
    const orm = flushwave({ schema, pglite: db })
    for (const tenant of TENANTS) {
      const em = orm.em({ settings: { 'app.tenant': tenant }, role: 'pglite_tenant' })
      em.create('Note', { tenant, body: `${tenant} 1` })
      await em.flush()
    }
    const acme = () => orm.em({ settings: { 'app.tenant': 'acme' }, role: 'pglite_tenant' })
    expect((await acme().find('Note', {})).map((n) => n.body)).toEqual(['acme 1'])
    const [who] = await acme().query<{ tenant: string; role: string }>("select current_setting('app.tenant') as tenant, current_user as role")
    expect(who).toEqual({ tenant: 'acme', role: 'pglite_tenant' })
    expect(await acme().transaction(async (tx) => (await tx.find('Note', {})).length)).toBe(1)
    const streamed: string[] = []
    for await (const note of acme().stream('Note', {})) streamed.push(note.tenant)
    expect(streamed).toEqual(['acme'])
    const wrong = acme()
    wrong.create('Note', { tenant: 'globex', body: 'acme as globex' })
    await expect(wrong.flush()).rejects.toBeInstanceOf(PermissionError)
    await expect(orm.em().transaction(async (tx) => (tx.create('Note', { tenant: 'acme', body: 'ro' }), tx.flush()), { readOnly: true })).rejects.toBeInstanceOf(ReadOnlyTransactionError)
    const [plain] = await orm.em().query<{ tenant: string | null }>("select current_setting('app.tenant', true) as tenant")
    expect(plain!.tenant ?? '').toBe('')
    expect((await db.query<{ n: number }>('select count(*)::int as n from note')).rows[0]!.n).toBe(2)
    await db.close()
  })
})
