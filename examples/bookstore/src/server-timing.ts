import type { FastifyReply } from 'fastify'
import type { FlushResult } from 'flushwave'

const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`

/**
 * `flush;dur=3.4;desc="5 statements, 1 round trip"`: the flush's duration (ms), its statements and
 * the network round trips it waited on. Added when they happened: `id allocation` (the shared id pool
 * ran short, and a nextval() statement before the transaction cost a round trip), `N cold` (shapes
 * this connection had not prepared: postgres.js describes them first, which costs round trips) and
 * `attempt N` (the unit of work was retried after a conflict).
 */
export function serverTiming(result: FlushResult, attempt = 1): string {
  const parts = [plural(result.statements, 'statement'), plural(result.roundTrips, 'round trip')]
  if (result.plan.preparation.length > 0) parts.push('id allocation')
  if (result.coldStatements > 0) parts.push(`${result.coldStatements} cold`)
  if (attempt > 1) parts.push(`attempt ${attempt}`)
  return `flush;dur=${result.durationMs.toFixed(1)};desc="${parts.join(', ')}"`
}

/** Sets the Server-Timing header of a response that flushed. */
export function timed(reply: FastifyReply, result: FlushResult, attempt = 1): FlushResult {
  reply.header('server-timing', serverTiming(result, attempt))
  return result
}

export interface ParsedTiming {
  durationMs: number
  statements: number
  roundTrips: number
  idAllocation: boolean
  cold: number
}

/** Reads the header back (for tests and the load script). */
export function parseServerTiming(header: string | null | undefined): ParsedTiming | undefined {
  const m = header?.match(/^flush;dur=([\d.]+);desc="(\d+) statements?, (\d+) round trips?(, id allocation)?(?:, (\d+) cold)?/)
  if (!m) return undefined
  return { durationMs: Number(m[1]), statements: Number(m[2]), roundTrips: Number(m[3]), idAllocation: !!m[4], cold: Number(m[5] ?? 0) }
}
