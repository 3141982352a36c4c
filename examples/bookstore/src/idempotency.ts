/**
 * The `Idempotency-Key` header of POST /checkout: a client that sends the request again (after a
 * timeout, a dropped connection) gets the first answer back instead of a second order.
 *
 * The key goes to `orm.unitOfWork(work, { idempotencyKey })`, which records it in the checkout's own
 * flush with what the work returned: a fingerprint of the request and the response body, as JSON
 * text (so that a replay sends the very bytes the first response sent). A request whose key is
 * recorded writes nothing and is answered from the record: 201 with `Idempotent-Replayed: true`, or
 * 422 when its body differs from the one that recorded the key.
 */
import { createHash } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { DEFAULT_IDEMPOTENCY_TABLE } from 'flushwave'
import { HttpError } from './errors.js'

/** `flushwave({ idempotencyKeys })`: the default table; a key counts for a day. */
export const IDEMPOTENCY_KEYS = { table: DEFAULT_IDEMPOTENCY_TABLE, keepSeconds: 86_400 } as const

export const MAX_KEY_LENGTH = 200

const KEY = new RegExp(`^[\\x20-\\x7e]{1,${MAX_KEY_LENGTH}}$`)

/** What a checkout records with its key (a type, not an interface: it must be a JsonValue). */
export type Recorded = {
  /** `fingerprint()` of the request body that recorded the key. */
  readonly request: string
  /** The 201 response body, as sent. */
  readonly body: string
}

/** The request's Idempotency-Key, or undefined without one; a 400 unless 1 to 200 printable ASCII characters. */
export function idempotencyKeyOf(request: FastifyRequest): string | undefined {
  const value = request.headers['idempotency-key']
  if (value === undefined) return undefined
  if (typeof value === 'string' && KEY.test(value)) return value
  throw new HttpError(400, {
    error: 'invalid request',
    problems: [{ path: 'headers/idempotency-key', message: `must be 1 to ${MAX_KEY_LENGTH} printable ASCII characters` }],
  })
}

/** SHA-256 of the body as canonical JSON: object keys sorted at every level, arrays in their order. */
export function fingerprint(body: unknown): string {
  return `sha256:${createHash('sha256').update(canonicalJson(body)).digest('hex')}`
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (value !== null && typeof value === 'object') {
    const object = value as Record<string, unknown>
    return `{${Object.keys(object)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(object[key])}`)
      .join(',')}}`
  }
  return JSON.stringify(value)
}

/** The answer of a request whose key is recorded: the recorded 201, or 422 if it came with another body. */
export function replay(reply: FastifyReply, recorded: Recorded, request: string): FastifyReply {
  if (recorded.request !== request) throw new HttpError(422, { error: 'idempotency key reused with a different request' })
  return reply.code(201).header('idempotent-replayed', 'true').type('application/json; charset=utf-8').send(recorded.body)
}
