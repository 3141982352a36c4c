import { describe, expect, it } from 'vitest'
import { cidr, float4Value, inet, real } from '../../src/schema/column-types.js'

/** mulberry32, seeded: the same values every run. */
function random(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

describe('the checks of real, inet and cidr, against their definitions', () => {
  it('real accepts exactly the numbers float4 gives back as they are', () => {
    const next = random(7)
    const values: number[] = [0, -0, 1, -1, 0.1, 16_777_216, 16_777_217, 3.4028235e38, 1e-45, 1.4e-45, 1200, 1.5e-7, 123456789]
    for (let i = 0; i < 100_000; i++) {
      const digits = 1 + Math.floor(next() * 10)
      const scale = 10 ** Math.floor(next() * 20 - 10)
      values.push(Number(((next() - 0.5) * scale).toPrecision(digits)), Math.fround(next() * scale), next() * 2 ** 30)
    }
    const wrong = values.filter((v) => (real.check(v) === undefined) !== Object.is(float4Value(v), v))
    expect(wrong.slice(0, 5)).toEqual([])
  })

  it('inet and cidr accept IPv4 text by its octets and prefix, and cidr refuses host bits', () => {
    const next = random(11)
    const octet = () => (next() < 0.05 ? String(256 + Math.floor(next() * 50)) : next() < 0.05 ? '0' + Math.floor(next() * 10) : String(Math.floor(next() * 256)))
    for (let i = 0; i < 20_000; i++) {
      const parts = [octet(), octet(), octet(), octet()]
      const prefix = next() < 0.5 ? undefined : Math.floor(next() * 36)
      const text = parts.join('.') + (prefix === undefined ? '' : `/${prefix}`)
      const octetsOk = parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255)
      const valid = octetsOk && (prefix === undefined || prefix <= 32)
      expect(inet.check(text) === undefined, text).toBe(valid)
      const address = parts.reduce((a, p) => a * 256 + Number(p), 0)
      const hostBits = prefix !== undefined && prefix < 32 && address % 2 ** (32 - prefix) !== 0
      expect(cidr.check(text) === undefined, text).toBe(valid && !hostBits)
    }
  })
})
