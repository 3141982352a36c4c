/**
 * A composite primary key and soft delete against a model, on every executor. Teams are
 * soft-deleted; memberships are keyed by (team, person, role) and soft-deleted too, and a team's
 * removal marks its live memberships in the same flush; people have a text key and are deleted for
 * good. Random steps create, change, remove, upsert and load by key, across EntityManagers, with
 * flushes that must fail as predicted (a person still referred to, a key the table holds already).
 * After every flush the three tables, read with plain SQL, must equal the model: after a
 * successful one, the model's pending state; after a failed one, its state as of the last success.
 * A mismatch prints its seed and the steps that led to it.
 *
 *   KEYS_MODEL_SEEDS=50 KEYS_MODEL_STEPS=200   more and longer sequences (default 6 of 80)
 *   KEYS_MODEL_LOG=1                           prints every sequence's steps
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineSchema, entity, EntityStateError, ForeignKeyViolationError, t, UniqueViolationError, type EntityOf } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'
import { seededRandom } from '../support/random-steps.js'

const schema = defineSchema({
  Team: entity('team', { id: t.id(), name: t.text(), deletedAt: t.timestamptz().nullable(), memberships: t.oneToMany('Membership', 'team') }, { softDelete: 'deletedAt' }),
  Person: entity('person', { code: t.providedId(t.text()), name: t.text() }),
  Membership: entity(
    'membership',
    {
      team: t.manyToOne('Team').onDelete('cascade'),
      person: t.manyToOne('Person'),
      role: t.text(),
      level: t.integer(),
      removedAt: t.timestamptz().nullable(),
    },
    { primaryKey: ['team', 'person', 'role'], softDelete: 'removedAt' },
  ),
})
type Defs = typeof schema.defs
type Team = EntityOf<typeof schema, 'Team'>
type Person = EntityOf<typeof schema, 'Person'>
type Membership = EntityOf<typeof schema, 'Membership'>

const SEEDS = Number(process.env.KEYS_MODEL_SEEDS ?? 6)
const STEPS = Number(process.env.KEYS_MODEL_STEPS ?? 80)
/** Roles, and codes of people: few, so that keys meet. Codes hold characters a key tuple escapes. */
const ROLES = ['lead', 'dev, "x"']
const CODES = ['p1', 'p{2}', 'p\\3', 'p "4"']

/** What the tables hold, by handle: teams `T1`…, people by code, memberships by `T1|code|role`. */
interface World {
  teams: Map<string, { name: string; deleted: boolean }>
  people: Map<string, { name: string }>
  memberships: Map<string, { level: number; removed: boolean }>
}
const copy = (w: World): World => ({ teams: new Map([...w.teams].map(([k, v]) => [k, { ...v }])), people: new Map([...w.people].map(([k, v]) => [k, { ...v }])), memberships: new Map([...w.memberships].map(([k, v]) => [k, { ...v }])) })
const keyOf = (team: string, code: string, role: string) => `${team}|${code}|${role}`
const partsOf = (key: string): [string, string, string] => {
  const [team, rest] = [key.slice(0, key.indexOf('|')), key.slice(key.indexOf('|') + 1)]
  const role = ROLES.find((r) => rest.endsWith(`|${r}`))!
  return [team, rest.slice(0, rest.length - role.length - 1), role]
}

describe.each(ALL_EXECUTORS)('composite keys and soft delete against a model on %s', (executor) => {
  let db: TestDatabase<Defs>
  beforeAll(async () => {
    db = await testDatabase(schema, { name: 'keys_model', executor })
  })
  afterAll(() => db?.close())

  for (let seed = 1; seed <= SEEDS; seed++) {
    it(`holds what the model holds through ${STEPS} random steps (seed ${seed})`, async () => {
      await db.sql`delete from membership`
      await db.sql`delete from team`
      await db.sql`delete from person`
      const next = seededRandom(seed)
      const pick = <T>(xs: readonly T[]): T | undefined => xs[Math.floor(next() * xs.length)]
      const log: string[] = []
      const where = () => `seed ${seed} (${executor}): ${log.join('; ')}`
      let committed: World = { teams: new Map(), people: new Map(), memberships: new Map() }
      let pending = copy(committed)
      const teamIds = new Map<string, number>()
      let teamCount = 0

      // The EntityManager of the moment and the objects it holds, by handle, code and key.
      let em = db.orm.em()
      let teams = new Map<string, Team>()
      let people = new Map<string, Person>()
      let held = new Map<string, Membership>()
      const fresh = () => {
        em = db.orm.em()
        teams = new Map()
        people = new Map()
        held = new Map()
        pending = copy(committed)
      }

      const team = (h: string): Team => teams.get(h) ?? em.ref('Team', teamIds.get(h)!)
      const person = (code: string): Person => people.get(code) ?? em.ref('Person', code)
      /** A membership of this EntityManager, held or loaded by its key (ids, or entities). */
      const membership = async (key: string): Promise<Membership | undefined> => {
        const known = held.get(key)
        if (known) return known
        const [h, code, role] = partsOf(key)
        const byEntities = next() < 0.5
        const found = await em.tryLoad('Membership', { team: byEntities ? team(h) : teamIds.get(h)!, person: byEntities ? person(code) : code, role })
        if (found) held.set(key, found)
        return found
      }

      const check = async () => {
        const rows = (await db.sql`select id::int as id, name, deleted_at is not null as deleted from team`) as unknown as { id: number; name: string; deleted: boolean }[]
        const handleOf = new Map([...teamIds].map(([h, id]) => [id, h]))
        expect(new Map(rows.map((r) => [handleOf.get(r.id) ?? `#${r.id}`, { name: r.name, deleted: r.deleted }])), where()).toEqual(committed.teams)
        const ps = (await db.sql`select code, name from person`) as unknown as { code: string; name: string }[]
        expect(new Map(ps.map((p) => [p.code, { name: p.name }])), where()).toEqual(committed.people)
        const ms = (await db.sql`select team_id::int as team, person_code as code, role, level, removed_at is not null as removed from membership`) as unknown as { team: number; code: string; role: string; level: number; removed: boolean }[]
        expect(new Map(ms.map((m) => [keyOf(handleOf.get(m.team) ?? `#${m.team}`, m.code, m.role), { level: m.level, removed: m.removed }])), where()).toEqual(committed.memberships)
      }

      /** Flushes; a failure must be the predicted one, and leaves the tables as they were. */
      const flush = async (fails?: new (...args: never[]) => Error) => {
        log.push(fails ? `flush (fails: ${fails.name})` : 'flush')
        if (fails) {
          const error = await em.flush().then(() => undefined, (e: unknown) => e)
          expect(error, where()).toBeInstanceOf(fails)
          await check()
          fresh()
          return
        }
        await em.flush()
        for (const [h, obj] of teams) if (!teamIds.has(h)) teamIds.set(h, obj.id)
        committed = pending
        pending = copy(committed)
        await check()
      }

      for (let step = 0; step < STEPS; step++) {
        const r = next()
        const liveTeams = [...pending.teams].filter(([, v]) => !v.deleted).map(([h]) => h)
        const knownPeople = [...pending.people.keys()]
        if (r < 0.1) {
          const h = `T${++teamCount}`
          log.push(`create team ${h}`)
          teams.set(h, em.create('Team', { name: h }))
          pending.teams.set(h, { name: h, deleted: false })
        } else if (r < 0.18) {
          const code = pick(CODES.filter((c) => !pending.people.has(c) && !committed.people.has(c)))
          if (!code) continue
          log.push(`create person ${code}`)
          people.set(code, em.create('Person', { code, name: `name of ${code}` }))
          pending.people.set(code, { name: `name of ${code}` })
        } else if (r < 0.4) {
          const [h, code, role] = [pick(liveTeams), pick(knownPeople), pick(ROLES)!]
          if (!h || !code) continue
          const key = keyOf(h, code, role)
          // A key taken already (a row, soft-deleted or not): created in a fresh EntityManager, the
          // server refuses it; one this EntityManager holds is refused at create.
          if (pending.memberships.has(key)) {
            if (!committed.memberships.has(key) || held.has(key) || next() < 0.7) continue
            log.push(`join ${key} again`)
            em.create('Membership', { team: team(h), person: person(code), role, level: 0 })
            await flush(UniqueViolationError)
            continue
          }
          const level = Math.floor(next() * 10)
          log.push(`join ${key} at ${level}`)
          held.set(key, em.create('Membership', { team: team(h), person: person(code), role, level }))
          pending.memberships.set(key, { level, removed: false })
        } else if (r < 0.55) {
          const key = pick([...pending.memberships].filter(([, v]) => !v.removed).map(([k]) => k))
          if (!key) continue
          const m = await membership(key)
          expect(m, where()).toBeDefined()
          const level = (m!.level + 1) % 100
          log.push(`level ${key} to ${level}`)
          m!.level = level
          pending.memberships.get(key)!.level = level
        } else if (r < 0.63) {
          const key = pick([...pending.memberships].filter(([, v]) => !v.removed).map(([k]) => k))
          if (!key) continue
          const m = await membership(key)
          log.push(`leave ${key}`)
          em.remove(m!)
          // Never flushed: it goes. Else its row is marked.
          if (committed.memberships.has(key)) pending.memberships.get(key)!.removed = true
          else {
            pending.memberships.delete(key)
            held.delete(key)
          }
        } else if (r < 0.7) {
          // A team whose memberships are all rows already: the flush marks the live ones with it.
          const h = pick(liveTeams.filter((x) => committed.teams.has(x) && ![...pending.memberships.keys()].some((key) => key.startsWith(`${x}|`) && !committed.memberships.has(key))))
          if (!h) continue
          log.push(`disband ${h}`)
          em.remove(teams.get(h) ?? (await em.load('Team', teamIds.get(h)!)))
          pending.teams.get(h)!.deleted = true
          for (const [key, v] of pending.memberships) if (key.startsWith(`${h}|`)) v.removed = true
        } else if (r < 0.76) {
          const code = pick(knownPeople.filter((c) => committed.people.has(c)))
          if (!code) continue
          log.push(`delete person ${code}`)
          em.remove(people.get(code) ?? (await em.load('Person', code)))
          pending.people.delete(code)
          // A new membership of theirs is refused before anything is sent; a row of theirs, even a
          // soft-deleted one, still refers to them: the server refuses the delete.
          const theirs = [...pending.memberships.keys()].filter((key) => partsOf(key)[1] === code)
          if (theirs.some((key) => !committed.memberships.has(key))) {
            await flush(EntityStateError)
            continue
          }
          if (theirs.length > 0) {
            await flush(ForeignKeyViolationError)
            continue
          }
        } else if (r < 0.84) {
          // Upsert on the primary key, in a fresh EntityManager (it holds no entity of that key).
          const [h, code, role] = [pick(liveTeams.filter((x) => committed.teams.has(x))), pick(knownPeople.filter((c) => committed.people.has(c))), pick(ROLES)!]
          if (!h || !code) continue
          await flush()
          fresh()
          const key = keyOf(h, code, role)
          const level = 50 + Math.floor(next() * 10)
          log.push(`upsert ${key} at ${level}`)
          const m = em.upsert('Membership', { team: team(h), person: person(code), role, level }, { onConflict: ['team', 'person', 'role'] })
          held.set(key, m)
          const row = pending.memberships.get(key)
          if (row) row.level = level
          else pending.memberships.set(key, { level, removed: false })
        } else if (r < 0.92) {
          // Load a key that may or may not be there: soft-deleted rows are left out unless asked for.
          const [h, code, role] = [pick([...teamIds.keys()]), pick(CODES)!, pick(ROLES)!]
          if (!h || held.has(keyOf(h, code, role)) || !committed.teams.has(h)) continue
          const key = keyOf(h, code, role)
          const withDeleted = next() < 0.5
          log.push(`load ${key}${withDeleted ? ' with deleted' : ''}`)
          const found = await em.tryLoad('Membership', { team: teamIds.get(h)!, person: code, role }, { withDeleted })
          const row = committed.memberships.get(key)
          const visible = row && (withDeleted || !row.removed) ? row : undefined
          if (!visible) expect(found, where()).toBeUndefined()
          else {
            expect(found?.level, where()).toBe(visible.level)
            held.set(key, found!)
          }
        } else if (r < 0.97) {
          await flush()
        } else {
          await flush()
          log.push('new EntityManager')
          fresh()
        }
      }
      await flush()
      if (process.env.KEYS_MODEL_LOG) console.log(where())
    })
  }
})
