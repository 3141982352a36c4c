import { describe, expect, it } from 'vitest'
import { newShapes, pipelineRoundTrips } from '../../src/drivers/postgres-js/cold-shapes.js'
import { prepareInline } from '../../src/drivers/postgres-js/inline-prepare.js'

/** A settled postgres.js query as the counters read it; `build` plays postgres.js assigning describeFirst. */
function query(text: string, cold: boolean, inline: boolean) {
  const q = { string: text, parameters: ['x'], prepared: !cold } as Record<string, unknown>
  if (inline) prepareInline(q)
  q.describeFirst = cold // what postgres.js's build() assigns
  return q
}

describe('cold shapes', () => {
  it('a new shape sent inline costs no round trip; one postgres.js described first stalls the rest', () => {
    const begin = { string: 'begin', parameters: [], prepared: false }
    expect(pipelineRoundTrips([begin, query('a', true, true), query('b', true, true), query('c', false, true)])).toBe(1)
    // Not pinned (a postgres.js without the flag): 2 + the 2 later queries + 1 later stalled one.
    expect(pipelineRoundTrips([begin, query('a', true, false), query('b', true, false), query('c', false, false)])).toBe(5)
  })

  it('the pin reads false whatever postgres.js assigns', () => {
    expect(query('a', true, true).describeFirst).toBe(false)
  })

  it('counts a new shape once per pipeline, however many chunks of it were parsed', () => {
    expect(newShapes([query('a', true, true), query('a', true, true), query('b', true, true), query('c', false, true)])).toBe(2)
  })
})
