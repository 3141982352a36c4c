import { describe, expect, it } from 'vitest'
import { isoTime } from '../../src/schema/iso-time.js'

/** A deterministic generator, so that a failure names the text that made it. */
function random(seed: number): () => number {
  let s = seed >>> 0
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32)
}

const pad = (n: number, width: number) => String(n).padStart(width, '0')

describe('isoTime', () => {
  it("reads to_json's timestamptz text as Date's parser does, to the millisecond", () => {
    const next = random(20261128)
    const pick = (n: number) => Math.floor(next() * n)
    for (let i = 0; i < 20_000; i++) {
      const fraction = pick(7) // 0 to 6 digits
      const offset = pick(27 * 4) * 15 - 12 * 60 // -12:00 to +14:45 in quarters of an hour
      const text =
        `${pad(1 + pick(9999), 4)}-${pad(1 + pick(12), 2)}-${pad(1 + pick(28), 2)}T${pad(pick(24), 2)}:${pad(pick(60), 2)}:${pad(pick(60), 2)}` +
        (fraction > 0 ? `.${pad(pick(10 ** fraction), fraction)}` : '') +
        `${offset < 0 ? '-' : '+'}${pad(Math.floor(Math.abs(offset) / 60), 2)}:${pad(Math.abs(offset) % 60, 2)}`
      const expected = new Date(text).getTime()
      if (!Object.is(isoTime(text), expected)) expect.fail(`${text}: ${isoTime(text)}, Date says ${expected}`)
    }
  })

  it('leaves what is not that form to Date, infinity and BC included', () => {
    for (const text of ['infinity', '-infinity', '0044-03-15T00:00:00+00:00 BC', '1900-01-01T00:00:00+00:53:28', '2026-11-28 01:02:03+00', '2026-1x-28T01:02:03+00:00']) {
      expect(isoTime(text)).toBe(new Date(text).getTime())
    }
  })
})
