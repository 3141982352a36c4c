import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DeadlockError, defineSchema, entity, FlushError, OptimisticLockError, t, type EntityManager } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

/**
 * Many EntityManagers flushing the same rows at once over a small pool. Money moves between
 * accounts: a lost update would create or destroy money, a statement in the wrong transaction
 * would show in the audit trail a trigger writes. CONCURRENCY_FLUSHES (default 100) sets how many
 * units of work race in each test.
 */
const FLUSHES = Number(process.env.CONCURRENCY_FLUSHES ?? 100)
const ACCOUNTS = 8
const START = 1_000

const schema = defineSchema({
  Account: entity('account', { id: t.id(), name: t.text(), balance: t.integer(), version: t.version() }),
  Transfer: entity('transfer', { id: t.id(), token: t.text(), from: t.manyToOne('Account'), to: t.manyToOne('Account'), amount: t.integer() }),
})
type D = typeof schema.defs

let db: TestDatabase<D>
let ids: number[] = []
const tally = { flushes: 0, committed: 0, conflicts: 0, attempts: 0, deadlocks: 0 }

beforeAll(async () => {
  db = await testDatabase(schema, { name: 'concurrency', max: 4 })
  // The server records which transaction wrote what: the ground truth for "one flush, one transaction".
  await db.sql.unsafe(`
    create table audit (xid text not null, kind text not null, ref text not null);
    create function audit_transfer() returns trigger language plpgsql as $$
      begin insert into audit values (pg_current_xact_id()::text, 'transfer', new.token); return new; end $$;
    create function audit_account() returns trigger language plpgsql as $$
      begin insert into audit values (pg_current_xact_id()::text, 'account', new.id::text); return new; end $$;
    create trigger transfer_audit after insert on transfer for each row execute function audit_transfer();
    create trigger account_audit after update on account for each row execute function audit_account();`)
})
afterAll(async () => {
  console.log(
    `concurrency: ${tally.flushes} concurrent flushes on a pool of 4; ${tally.committed} committed, ${tally.conflicts} stale-version conflicts ` +
      `surfaced; ${tally.attempts} attempts under the retry policy; ${tally.deadlocks} deadlocks broken; no lost update`,
  )
  await db.close()
})

async function resetAccounts(): Promise<void> {
  // Not `restart identity`: ids pooled by this process would come out of the sequence again.
  await db.sql`truncate transfer, audit`
  await db.sql`delete from account`
  const em = db.orm.em()
  const accounts = Array.from({ length: ACCOUNTS }, (_, i) => em.create('Account', { name: `a${i}`, balance: START }))
  await em.flush()
  ids = accounts.map((a) => a.id)
}

/** Overlapping pairs: every account is in many transfers. */
function pair(n: number): [number, number, number] {
  const from = ids[n % ACCOUNTS]!
  const to = ids[(n * 3 + 1) % ACCOUNTS]!
  return [from, to === from ? ids[(n + 1) % ACCOUNTS]! : to, 1 + (n % 7)]
}

async function transfer(em: EntityManager<D>, n: number, token: string): Promise<void> {
  const [fromId, toId, amount] = pair(n)
  const [from, to] = await Promise.all([em.load('Account', fromId), em.load('Account', toId)])
  from.balance -= amount
  to.balance += amount
  em.create('Transfer', { token, from, to, amount })
}

/** Balances, versions and the audit trail against the transfers that committed. */
async function check(committed: readonly number[]): Promise<void> {
  const expected = new Map(ids.map((id) => [id, { balance: START, version: 1 }]))
  for (const n of committed) {
    const [from, to, amount] = pair(n)
    expected.get(from)!.balance -= amount
    expected.get(to)!.balance += amount
    expected.get(from)!.version++
    expected.get(to)!.version++
  }
  const rows = await db.sql`select id, balance, version from account order by id`
  expect(rows.map((r) => ({ id: Number(r.id), balance: r.balance, version: Number(r.version) }))).toEqual(
    ids.map((id) => ({ id, ...expected.get(id)! })),
  )
  const [{ total }] = (await db.sql`select sum(balance)::int as total from account`) as unknown as [{ total: number }]
  expect(total).toBe(ACCOUNTS * START)
  expect(Number((await db.sql`select count(*) from transfer`)[0]!.count)).toBe(committed.length)
  // Each committed flush is one transaction holding its transfer and its two account updates, and nothing else.
  const trail = await db.sql`
    select xid, count(*) filter (where kind = 'transfer')::int as transfers, count(*) filter (where kind = 'account')::int as accounts
    from audit group by xid`
  expect(trail).toHaveLength(committed.length)
  for (const row of trail) expect(row).toMatchObject({ transfers: 1, accounts: 2 })
}

async function poolIdle(): Promise<void> {
  const busy = await db.sql`
    select count(*)::int as n from pg_stat_activity
    where datname = current_database() and pid <> pg_backend_pid() and state <> 'idle' and backend_type = 'client backend'`
  expect(busy[0]!.n).toBe(0)
  // Every pooled connection can be taken: none was left reserved.
  const reserved = await Promise.all(Array.from({ length: 4 }, () => db.sql.reserve()))
  for (const conn of reserved) conn.release()
}

describe('concurrent units of work on overlapping rows', () => {
  it('without retries, every conflict surfaces as OptimisticLockError and no update is lost', { timeout: 120_000 }, async () => {
    await resetAccounts()
    const outcomes = await Promise.all(
      Array.from({ length: FLUSHES }, async (_, n) => {
        const em = db.orm.em()
        await transfer(em, n, `plain-${n}`)
        return em.flush().then(
          () => n,
          (error: unknown) => error,
        )
      }),
    )
    const committed = outcomes.filter((o): o is number => typeof o === 'number')
    const failures = outcomes.filter((o) => typeof o !== 'number')
    for (const failure of failures) expect(failure).toBeInstanceOf(OptimisticLockError)
    expect(committed.length).toBeGreaterThan(0)
    expect(failures.length).toBeGreaterThan(0) // they really raced
    await check(committed)
    await poolIdle()
    tally.flushes += FLUSHES
    tally.committed += committed.length
    tally.conflicts += failures.length
  })

  it('with a retry policy, every unit of work commits exactly once', { timeout: 120_000 }, async () => {
    await resetAccounts()
    const results = await Promise.all(
      Array.from({ length: FLUSHES }, (_, n) => db.orm.unitOfWork((em) => transfer(em, n, `retried-${n}`), { attempts: 50 })),
    )
    await check(Array.from({ length: FLUSHES }, (_, n) => n))
    const attempts = results.reduce((sum, r) => sum + r.attempts, 0)
    expect(attempts).toBeGreaterThan(FLUSHES) // some lost a race and ran again
    await poolIdle()
    tally.flushes += FLUSHES
    tally.committed += FLUSHES
    tally.attempts += attempts
  })

  it('a deadlock with another transaction surfaces as DeadlockError, and the retry policy replays it', { timeout: 60_000 }, async () => {
    await resetAccounts()
    const [a, b] = [ids[0]!, ids[1]!]
    for (const attempts of [1, 3]) {
      const other = await db.sql.reserve()
      let calls = 0
      try {
        await other`begin`
        await other`select 1 from account where id = ${b} for update`
        const work = async (em: EntityManager<D>) => {
          calls++
          const [x, y] = await Promise.all([em.load('Account', a), em.load('Account', b)])
          x.balance -= 1
          // The transfer's foreign key check waits for b, held by `other`, while the flush holds a;
          // then `other` asks for a: a deadlock, and the flush has waited longest, so it is the victim.
          em.create('Transfer', { token: `deadlock-${attempts}-${calls}`, from: x, to: y, amount: 1 })
          if (calls === 1) {
            setTimeout(() => {
              void other`select 1 from account where id = ${a} for update`.then(() => other`rollback`).catch(() => undefined)
            }, 300)
          }
        }
        const outcome = await db.orm.unitOfWork(work, { attempts }).then((r) => r, (e: unknown) => e)
        if (attempts === 1) {
          expect(outcome).toBeInstanceOf(DeadlockError)
          expect((outcome as DeadlockError).retryable).toBe(true)
          tally.deadlocks++
        } else {
          expect(outcome).toMatchObject({ attempts: 2 })
          tally.deadlocks++
          tally.attempts += 2
        }
      } finally {
        await other`rollback`.catch(() => undefined)
        other.release()
      }
    }
    await poolIdle()
  })
})
