import type { SeriesFactory } from './types.js'

/**
 * Every series, in report order. Each module exports `series: SeriesFactory`, or throws on import
 * when its ORM cannot be installed or run here (the runner reports the error and goes on).
 */
export const SERIES = [
  'flushwave',
  'flushwave-pg',
  'flushwave-knex',
  'flushwave-begin',
  'flushwave-noledger',
  'flushwave-nootel',
  'raw-pipelined',
  'raw-copy',
  'raw-sequential',
  'mikro-orm',
  'typeorm',
  'prisma',
  'drizzle',
  'joist',
] as const

export type SeriesName = (typeof SERIES)[number]

export async function loadSeries(name: string): Promise<SeriesFactory> {
  const module = (await import(`./${name}.js`)) as { series?: SeriesFactory }
  if (!module.series) throw new Error(`series module ${name} exports no \`series\``)
  return module.series
}
