import { randomUUID } from 'node:crypto'

/**
 * UUID version 7 (RFC 9562): 48 bits of Unix milliseconds then random bits, so ids made on the client
 * sort roughly by creation time and keep B-tree inserts local. Built from a version-4 UUID, whose
 * variant bits are v7's too and whose random bits after its version digit are the 74 v7 needs:
 * `randomUUID()` draws from a cached entropy pool, where a `randomFill` per id made every create
 * slower (docs/design-notes.md, "UUID v7 from randomUUID").
 */
export function uuidv7(now: number = Date.now()): string {
  const time = now.toString(16).padStart(12, '0')
  return `${time.slice(0, 8)}-${time.slice(8, 12)}-7${randomUUID().slice(15)}`
}
