/**
 * Read-your-writes across requests, with read replicas (REPLICA_URLS). A request that wrote answers
 * with its commit's WAL position (`em.consistencyToken()`) in a `Consistency-Token` header and a
 * cookie; the client's next request sends either back, and its EntityManagers read from a replica
 * only once that replica has replayed the position (checked in the read's own pipeline), else
 * from the primary. So a user's next page shows their own write, and everyone else's reads stay
 * on the replicas. Without replicas there is nothing to wait for and no token is sent.
 *
 * Handlers take their EntityManagers from `request.em()`, never `orm.em()`: it applies the token
 * and remembers the EntityManager, whose token the reply then carries.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { EntityManager, Flushwave } from 'flushwave'
import { HttpError } from './errors.js'
import type { Defs } from './schema.js'

export const TOKEN_HEADER = 'consistency-token'
export const TOKEN_COOKIE = 'fw_seen'
/** A WAL position (`16/B374D848`) or 'primary' (after a transaction that wrote: read the primary). */
const TOKEN = /^(?:[0-9A-F]{1,8}\/[0-9A-F]{1,8}|primary)$/i

declare module 'fastify' {
  interface FastifyRequest {
    /** A new EntityManager for this request, reading what the client's token says it has seen. */
    em(): EntityManager<Defs>
  }
}

/** What one request knows: the token it came with, and the EntityManagers it made. */
interface Seen {
  readonly after: string | undefined
  readonly ems: EntityManager<Defs>[]
}

const seen = new WeakMap<FastifyRequest, Seen>()

export function consistency(app: FastifyInstance, orm: Flushwave<Defs>): void {
  app.decorateRequest('em', function (this: FastifyRequest) {
    const state = stateOf(this)
    const em = orm.em(state.after === undefined ? {} : { after: state.after })
    state.ems.push(em)
    return em
  })
  app.addHook('onRequest', async (request) => {
    const token = tokenOf(request)
    if (token !== undefined && !TOKEN.test(token)) throw new HttpError(400, { error: 'invalid consistency token', token })
    seen.set(request, { after: token, ems: [] })
  })
  app.addHook('onSend', async (request, reply, payload) => {
    const token = tokenToSend(request)
    if (token !== undefined) setToken(reply, token)
    return payload
  })
}

/** An EntityManager made elsewhere (`orm.unitOfWork`'s) whose writes the reply's token must cover. */
export function remember(request: FastifyRequest, em: EntityManager<Defs>): void {
  stateOf(request).ems.push(em)
}

function stateOf(request: FastifyRequest): Seen {
  let state = seen.get(request)
  if (state === undefined) seen.set(request, (state = { after: undefined, ems: [] }))
  return state
}

/** The header wins over the cookie: an API client says what it has seen; a browser has its cookie sent. */
function tokenOf(request: FastifyRequest): string | undefined {
  const header = request.headers[TOKEN_HEADER]
  if (typeof header === 'string' && header !== '') return header
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const [name, value] = part.trim().split('=')
    if (name === TOKEN_COOKIE && value) return decodeURIComponent(value)
  }
  return undefined
}

/** The last write's position, when this request wrote; otherwise the token it came with, passed on. */
function tokenToSend(request: FastifyRequest): string | undefined {
  const state = seen.get(request)
  if (state === undefined) return undefined
  for (let i = state.ems.length - 1; i >= 0; i--) {
    const token = state.ems[i]!.consistencyToken()
    if (token !== undefined && token !== state.after) return token
  }
  return state.after
}

function setToken(reply: FastifyReply, token: string): void {
  reply.header(TOKEN_HEADER, token)
  // A minute is longer than any replica here lags; past it, every replica has replayed the write.
  reply.header('set-cookie', `${TOKEN_COOKIE}=${encodeURIComponent(token)}; Path=/; Max-Age=60; HttpOnly; SameSite=Lax`)
}
