import type { WriteStatement } from '../../sql/statement.js'

/** The statements of one pipeline, all of one wave. */
export interface Batch {
  readonly wave: number
  readonly statements: readonly WriteStatement[]
}

/**
 * Splits waves into pipelines of at most `maxPipeline` statements: the first also carries `head`
 * statements of the protocol's (BEGIN and the capture), the last `tail` (COMMIT and the carried
 * ids). A wave never shares a pipeline with the next one. Without statements, one empty pipeline:
 * BEGIN and COMMIT still go.
 */
export function batches(waves: readonly (readonly WriteStatement[])[], maxPipeline: number, head: number, tail: number): Batch[] {
  const out: Batch[] = []
  let left = 0
  for (const wave of waves) left += wave.length
  waves.forEach((statements, wave) => {
    for (let i = 0; i < statements.length; ) {
      const room = maxPipeline - (out.length === 0 ? head : 0)
      const inWave = statements.length - i
      // The pipeline that takes the last statement needs room for the tail too. When it does not
      // fit, this pipeline leaves it one statement (none, when the head fills it).
      const take = inWave === left && inWave + tail > room && inWave <= room ? inWave - 1 : Math.min(inWave, room)
      out.push({ wave, statements: i === 0 && take === statements.length ? statements : statements.slice(i, i + take) })
      i += take
      left -= take
    }
  })
  if (out.length === 0) out.push({ wave: 0, statements: [] })
  return out
}
