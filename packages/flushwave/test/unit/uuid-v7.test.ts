import { describe, expect, it } from 'vitest'
import { uuidv7 } from '../../src/ids/uuid-v7.js'

describe('uuidv7', () => {
  it('is an RFC 9562 version 7 UUID whose first 48 bits are the Unix milliseconds', () => {
    const at = Date.UTC(2026, 10, 22, 18, 30, 0, 123)
    const id = uuidv7(at)
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(at)
    expect(uuidv7(0).slice(0, 13)).toBe('00000000-0000')
  })

  it('sorts by creation time and never repeats', () => {
    const ids = Array.from({ length: 10_000 }, (_, i) => uuidv7(1_700_000_000_000 + i))
    expect(new Set(ids).size).toBe(ids.length)
    expect([...ids].sort()).toEqual(ids)
  })
})
