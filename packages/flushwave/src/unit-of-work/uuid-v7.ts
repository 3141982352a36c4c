import { randomFillSync } from 'node:crypto'

/**
 * UUID version 7 (RFC 9562): 48 bits of Unix milliseconds then random bits, so ids made on the client
 * sort roughly by creation time and keep B-tree inserts local.
 */
export function uuidv7(now: number = Date.now()): string {
  const b = randomFillSync(new Uint8Array(16))
  let ms = now
  for (let i = 5; i >= 0; i--) {
    b[i] = ms % 256
    ms = Math.floor(ms / 256)
  }
  b[6] = (b[6]! & 0x0f) | 0x70
  b[8] = (b[8]! & 0x3f) | 0x80
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}
